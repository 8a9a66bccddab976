// The PinLater service, wire-compatible with Pinterest's PinLater: every name, field
// id, type and default below matches what existing PinLater clients send and expect
// (see ../shared/design/PINLATER_CONTRACT.md). pinledger's additions are new methods
// only, at the end of the service; old clients never call them.
//
// Transport: framed, binary protocol. Default port 9010.

namespace java com.pinterest.pinlater.thrift
namespace py pinlater

enum ErrorCode {
  CONTINUATION_INVALID = 400,
  PASSWORD_INVALID = 403,
  QUEUE_NAME_INVALID = 410,
  QUEUE_NAME_TOO_LONG = 411,
  QUEUE_NOT_FOUND = 413,
  PRIORITY_NOT_SUPPORTED = 416,
  DEQUEUE_RATE_LIMITED = 429,
  ENQUEUE_REJECTED = 430,
  UNKNOWN = 500,
  NO_HEALTHY_SHARDS = 501,
  SHARD_CONNECTION_FAILED = 502,
}

enum PinLaterJobState {
  PENDING = 0,
  IN_PROGRESS = 1,
  SUCCEEDED = 2,
  FAILED = 3,
}

// scanJobs continuations: "0" starts a scan, "-1" says there is nothing after.
const string CONTINUATION_START = "0"
const string CONTINUATION_END = "-1"

struct PinLaterJob {
  1: required binary body,
  2: optional byte priority = 1,
  3: optional i64 runAfterTimestampMillis,
  4: optional i32 numAttemptsAllowed = 2,
  5: optional string customStatus = "",
  // pinledger addition: a unique job's key. While a job of the queue holds the key
  // (unfinished, or finished less than the queue's uniqueForSeconds ago), enqueueing it
  // creates nothing and answers the holder's descriptor in this job's place. At most
  // 255 characters. Old servers and clients skip the field
  // (docs/decisions/0037-unique-jobs.md).
  100: optional string uniqueKey,
}

struct PinLaterEnqueueRequest {
  1: required string queueName,
  2: required list<PinLaterJob> jobs,
}

struct PinLaterEnqueueResponse {
  1: required list<string> jobDescriptors,
}

struct PinLaterJobAckInfo {
  1: required string jobDescriptor,
  2: optional string appendCustomStatus = "",
  3: optional i64 retryDelayMillis = 0,
}

struct PinLaterJobAckRequest {
  1: required string queueName,
  2: optional list<PinLaterJobAckInfo> jobsSucceeded,
  3: optional list<PinLaterJobAckInfo> jobsFailed,
}

struct PinLaterDequeueRequest {
  1: required string queueName,
  2: required i32 limit,
  3: optional PinLaterJobAckRequest jobAckRequest,
  4: optional bool dryRun = false,
  5: optional double coverage = 1.0,
}

struct PinLaterDequeueMetadata {
  1: optional i32 attemptsAllowed,
  2: optional i32 attemptsRemaining,
}

struct PinLaterDequeueResponse {
  1: optional map<string, binary> jobs,
  2: optional map<string, PinLaterDequeueMetadata> jobMetadata,
  // pinledger addition: for each job whose enqueue was traced, the W3C traceparent of
  // the attempt this dequeue started, in the job's own trace (a worker's processing
  // nests in it). Old clients skip the field (docs/decisions/0005-dequeue-traceparents.md,
  // 0028-a-trace-per-job.md).
  3: optional map<string, string> jobTraceparents,
}

struct PinLaterCheckpointJobRequest {
  1: required string jobDescriptor,
  2: optional string newBody,
  3: optional bool moveToPending = false,
  4: optional i64 runAfterTimestampMillis,
  5: optional i32 numOfAttemptsAllowed,
  6: optional string prependCustomStatus,
}

struct PinLaterCheckpointJobsRequest {
  1: required string queueName,
  2: required list<PinLaterCheckpointJobRequest> requests,
}

struct PinLaterLookupJobRequest {
  1: required list<string> jobDescriptors,
  2: optional bool includeBody = false,
}

struct PinLaterJobInfo {
  1: required string jobDescriptor,
  2: required PinLaterJobState jobState,
  10: required i32 attemptsAllowed,
  3: required i32 attemptsRemaining,
  4: required string customStatus,
  5: required i64 createdAtTimestampMillis,
  6: optional i64 runAfterTimestampMillis,
  7: optional i64 updatedAtTimestampMillis,
  8: optional string claimDescriptor,
  9: optional binary body,
  // pinledger addition: the job's uniqueKey, when it was enqueued with one.
  100: optional string uniqueKey,
}

struct PinLaterGetJobCountRequest {
  1: required string queueName,
  2: required PinLaterJobState jobState,
  3: optional byte priority,
  4: optional bool countFutureJobs = false,
  5: optional string bodyRegexToMatch,
}

struct PinLaterScanJobsRequest {
  1: required string queueName,
  2: required PinLaterJobState jobState,
  3: optional byte priority,
  4: optional bool scanFutureJobs = false,
  5: optional string continuation = "0",
  6: optional i32 limit = 100,
  7: optional string bodyRegexToMatch,
}

struct PinLaterScanJobsResponse {
  1: required list<PinLaterJobInfo> scannedJobs,
  2: optional string continuation = "-1",
}

struct PinLaterRetryFailedJobsRequest {
  1: required string queueName,
  2: optional byte priority = 1,
  3: optional i32 attemptsToAllow = 1,
  4: optional i64 runAfterTimestampMillis,
  5: optional i32 limit = 1000,
}

struct PinLaterDeleteJobsRequest {
  1: required string queueName,
  2: required PinLaterJobState jobState,
  3: optional byte priority = 1,
  4: optional string bodyRegexToMatch,
  5: optional i32 limit = 1000,
}

struct RequestContext {
  // "service:host" of the caller. Acks and checkpoints without a claim are fenced by it.
  1: required string source,
  2: optional string requestId = "",
}

exception PinLaterException {
  1: required ErrorCode errorCode,
  2: required string message,
  // pinledger addition (decision 0036): set by checkpointJobs when jobs it names were
  // cancelled (cancelJobs): their descriptors. The worker should stop those jobs' work
  // and not ack them. The error code is UNKNOWN, so a client that does not know the
  // field sees a refused checkpoint, as it would of any other.
  3: optional list<string> cancelledJobDescriptors,
}

// ---- pinledger additions: cancelling jobs (cancelJobs, decision 0036) ----

struct PinLaterCancelJobsRequest {
  1: required string queueName,
  // The jobs to cancel, each of the queue (a malformed one refuses the request).
  2: required list<string> jobDescriptors,
  // Why, for the job's custom status: "cancelled by <source>: <reason>".
  3: optional string reason = "",
}

struct PinLaterCancelJobsResponse {
  // The descriptors asked for whose jobs are cancelled after the call (also those
  // cancelled before it); a job that had finished, or does not exist, is left out.
  1: required list<string> cancelledJobDescriptors,
}

// ---- pinledger additions: job history (getJobHistory) ----

struct PinLaterJobHistoryRequest {
  1: required string jobDescriptor,
  // Only the steps at or before this offset of the job's partition: the job as it was
  // after that step. Unset: the whole history.
  2: optional i64 atOffset,
}

// One event that named the job, applied or rejected, in log order.
struct PinLaterJobHistoryStep {
  // Where the event sits: the record's offset in the job's partition, the event's
  // index within the record.
  1: required i64 offset,
  2: required i32 index,
  3: required i64 timestampMillis,
  // Enqueued, Claimed, Succeeded, Failed, Checkpointed, TimedOut, Retried, Deleted or
  // Collected.
  4: required string action,
  // Who asked: the caller's RequestContext, and the pinledger server that appended it.
  5: required string source,
  6: required string requestId,
  7: required string server,
  // The claim the event named, or else the job's claim when it arrived.
  8: optional string claimDescriptor,
  // The attempt the event belongs to (0 before the first claim).
  9: required i32 attempt,
  10: required bool applied,
  // Why a rejected event did not apply (e.g. a stale ack); empty when applied.
  11: required string reason,
  // The job after the event; unset when the event removed it (or there was no job).
  12: optional PinLaterJobState stateAfter,
  13: optional i32 attemptsRemainingAfter,
  // The custom status change: kind "set" (enqueue), "append" (acks) or "prepend"
  // (checkpoints), and its text; unset when the event did not change it.
  14: optional string statusChangeKind,
  15: optional string statusChangeText,
  // The event's own fields as a JSON object (bodies only by their size).
  16: required string detailJson,
  // W3C trace context of the record (the enqueue's for an Enqueued step).
  17: optional string traceparent,
}

// One attempt (one applied claim) and its latency breakdown, in milliseconds.
struct PinLaterJobAttempt {
  1: required i32 number,
  2: required string claimDescriptor,
  3: required i64 claimedAtMillis,
  // When the job became due for this attempt (enqueue, end of a retry delay, ...).
  4: required i64 dueAtMillis,
  // "succeeded", "failed", "timed out", "released", "deleted" or "still running".
  5: required string outcome,
  6: optional i64 endedAtMillis,
  // From becoming due to the claim.
  7: required i64 queuedMillis,
  // From the claim to the end; unset while running.
  8: optional i64 runningMillis,
  // Delay scheduled after the attempt before the job was due again; unset when the job
  // did not go back to PENDING.
  9: optional i64 retryDelayMillis,
  // A timed-out attempt's running time: work done without a result.
  10: required i64 timeoutLostMillis,
}

struct PinLaterJobHistory {
  1: required string jobDescriptor,
  // Empty when the ledger holds nothing for the job (or nothing up to atOffset).
  2: required list<PinLaterJobHistoryStep> steps,
  3: required list<PinLaterJobAttempt> attempts,
  // The job as of the last step, without its body; unset when it was removed.
  4: optional PinLaterJobInfo job,
}

service PinLater {
  // Creates the queue: its Kafka topic, with the partitions the queue config gives it
  // (else PINLEDGER_PARTITIONS), and its record in the catalog. Idempotent. Answers once
  // every partition has a serving owner (at most 10 s), so jobs enqueued next are served
  // at once. A name holds 1 to 64 ASCII letters, digits and `_`.
  void createQueue(1: RequestContext context, 2: string name)
      throws (1: PinLaterException e)

  // Deletes the queue and its jobs, given the admin password (PASSWORD_INVALID otherwise,
  // and when none is configured). Idempotent. A queue created again under the name
  // starts empty.
  void deleteQueue(1: RequestContext context, 2: string name, 3: string password)
      throws (1: PinLaterException e)

  // Appends the jobs to the queue's log and answers once Kafka acknowledged them: one
  // descriptor per job, in request order, `queue:s<partition>:p<priority>:<id>`. A job
  // is PENDING, due at runAfterTimestampMillis or now.
  PinLaterEnqueueResponse enqueueJobs(1: RequestContext context,
                                      2: PinLaterEnqueueRequest request)
      throws (1: PinLaterException e)

  // Claims up to `limit` (at most 1000) due jobs, the highest priority first, then the
  // oldest, from every partition of the queue (a server forwards what it cannot fill to
  // the partitions' owners), and answers once the claims are in the log. A piggybacked
  // jobAckRequest is appended with the claims (one round trip), and applied even when
  // the queue's rate limit refuses the dequeue (DEQUEUE_RATE_LIMITED). dryRun lists due
  // jobs without claiming them.
  PinLaterDequeueResponse dequeueJobs(1: RequestContext context,
                                      2: PinLaterDequeueRequest request)
      throws (1: PinLaterException e)

  // Succeeded: the job is SUCCEEDED, appendCustomStatus appended to its status. Failed:
  // PENDING again after retryDelayMillis with one attempt used, or FAILED on its last.
  // An ack applies only to a job IN_PROGRESS under a claim made with the caller's
  // RequestContext.source; any other is recorded in the job's history as rejected and
  // changes nothing, so an ack is safe to send again.
  void ackDequeuedJobs(1: RequestContext context, 2: PinLaterJobAckRequest request)
      throws (1: PinLaterException e)

  // For jobs IN_PROGRESS under the caller's claim: replaces the body (newBody), resets
  // the attempts (numOfAttemptsAllowed), prepends to the custom status, and either
  // renews the claim (a heartbeat: its timeout starts again) or, with moveToPending,
  // puts the job back to PENDING, due at runAfterTimestampMillis or now. A checkpoint of
  // a stale claim is recorded as rejected and changes nothing.
  void checkpointJobs(1: RequestContext context, 2: PinLaterCheckpointJobsRequest request)
      throws (1: PinLaterException e)

  // The jobs the descriptors name (bodies only with includeBody); a job not found is
  // left out. Waits (at most PINLEDGER_READ_WAIT_S) until the projection holds the
  // records the descriptors name and this server's own appends. An imported job answers
  // to its PinLater descriptor too.
  map<string, PinLaterJobInfo> lookupJobs(1: RequestContext context,
                                          2: PinLaterLookupJobRequest request)
      throws (1: PinLaterException e)

  // The exact count (not capped) of the queue's jobs in a state: every priority unless
  // one is given, due now or (countFutureJobs) due later, optionally only those whose
  // body matches a regex (the store's own regular expressions).
  i32 getJobCount(1: RequestContext context, 2: PinLaterGetJobCountRequest request)
      throws (1: PinLaterException e)

  // Every queue of the catalog.
  set<string> getQueueNames(1: RequestContext context)
      throws (1: PinLaterException e)

  // The queue's jobs in a state, without their bodies, newest run_after first, `limit`
  // (at most 1000) at a time; the answer's continuation continues the scan
  // (CONTINUATION_END: nothing after).
  PinLaterScanJobsResponse scanJobs(1: RequestContext context,
                                    2: PinLaterScanJobsRequest request)
      throws (1: PinLaterException e)

  // FAILED jobs of one priority back to PENDING with attemptsToAllow attempts, due at
  // runAfterTimestampMillis or now, at most `limit` of them; returns how many.
  i32 retryFailedJobs(1: RequestContext context, 2: PinLaterRetryFailedJobsRequest request)
      throws (1: PinLaterException e)

  // Deletes up to `limit` jobs in a state, of one priority, optionally only those whose
  // body matches a regex; returns how many.
  i32 deleteJobs(1: RequestContext context, 2: PinLaterDeleteJobsRequest request)
      throws (1: PinLaterException e)

  // ---- pinledger additions (new methods only) ----

  // Dequeue served only from the partitions this server owns: what a server that owns
  // none (or not enough) of a queue's partitions forwards to the owners. No rate limit
  // (the receiving server applied it), no piggybacked acks (applied already), no
  // further forwarding.
  PinLaterDequeueResponse dequeueOwned(1: RequestContext context,
                                       2: PinLaterDequeueRequest request)
      throws (1: PinLaterException e)

  // A job's history: every event that named it, applied or rejected and why, with the
  // actor, claim, attempt and state after each, and each attempt's latency breakdown.
  // Sees this server's own appends (like lookupJobs). A malformed descriptor or an
  // unknown queue: the same errors as lookupJobs.
  PinLaterJobHistory getJobHistory(1: RequestContext context,
                                   2: PinLaterJobHistoryRequest request)
      throws (1: PinLaterException e)

  // Cancels PENDING and IN_PROGRESS jobs (ledger format 3; below it, refused): each ends
  // FAILED with no attempts left, "cancelled by <source>: <reason>" prepended to its
  // custom status, and its history names the canceller. A running job's worker hears
  // it at its next checkpointJobs (PinLaterException.cancelledJobDescriptors); its ack
  // is recorded as rejected and changes nothing. Answers once the projection holds the
  // cancels.
  PinLaterCancelJobsResponse cancelJobs(1: RequestContext context,
                                        2: PinLaterCancelJobsRequest request)
      throws (1: PinLaterException e)
}
