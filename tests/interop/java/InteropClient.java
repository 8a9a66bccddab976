// A PinLater client in Java, on code that `thrift --gen java` generates from our IDL and
// the stock Apache Thrift library: framed transport + binary protocol, as PinLater's
// Java clients speak it. tests/integration/test_interop.py compiles and runs it.
//
// Usage: java InteropClient <host> <port> <queue>
// Creates the queue (twice: idempotent; and an invalid name must raise PinLaterException
// QUEUE_NAME_INVALID), enqueues 3 jobs, dequeues them, acks them as succeeded, looks them
// up and prints one JSON object per job: descriptor, state, customStatus, body.
// Exit status 0 on success; any exception prints its stack trace and exits 1.

import com.pinterest.pinlater.thrift.ErrorCode;
import com.pinterest.pinlater.thrift.PinLater;
import com.pinterest.pinlater.thrift.PinLaterDequeueRequest;
import com.pinterest.pinlater.thrift.PinLaterDequeueResponse;
import com.pinterest.pinlater.thrift.PinLaterEnqueueRequest;
import com.pinterest.pinlater.thrift.PinLaterException;
import com.pinterest.pinlater.thrift.PinLaterJob;
import com.pinterest.pinlater.thrift.PinLaterJobAckInfo;
import com.pinterest.pinlater.thrift.PinLaterJobAckRequest;
import com.pinterest.pinlater.thrift.PinLaterJobInfo;
import com.pinterest.pinlater.thrift.PinLaterLookupJobRequest;
import com.pinterest.pinlater.thrift.RequestContext;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.thrift.TBaseHelper;
import org.apache.thrift.protocol.TBinaryProtocol;
import org.apache.thrift.transport.TSocket;
import org.apache.thrift.transport.TTransport;
import org.apache.thrift.transport.layered.TFramedTransport;

public final class InteropClient {
  private static final String STATUS = "done-by-java";
  private static final int JOBS = 3;
  private static final long DEQUEUE_DEADLINE_MS = 30_000;
  private static final long DEQUEUE_PAUSE_MS = 200;
  private static final int SOCKET_TIMEOUT_MS = 30_000;

  public static void main(String[] args) {
    if (args.length != 3) {
      System.err.println("usage: java InteropClient <host> <port> <queue>");
      System.exit(2);
    }
    try {
      run(args[0], Integer.parseInt(args[1]), args[2]);
    } catch (Exception e) {
      e.printStackTrace();
      System.exit(1);
    }
    System.exit(0);
  }

  private static void run(String host, int port, String queue) throws Exception {
    TTransport transport = new TFramedTransport(new TSocket(host, port, SOCKET_TIMEOUT_MS));
    transport.open();
    try {
      PinLater.Client client = new PinLater.Client(new TBinaryProtocol(transport));
      RequestContext ctx = new RequestContext("interop-java:localhost").setRequestId("java-1");

      client.createQueue(ctx, queue);
      client.createQueue(ctx, queue); // idempotent
      // A declared exception crosses the wire as PinLaterException with its code.
      try {
        client.createQueue(ctx, "not a queue!");
        throw new IllegalStateException("createQueue accepted the name 'not a queue!'");
      } catch (PinLaterException e) {
        if (e.getErrorCode() != ErrorCode.QUEUE_NAME_INVALID) {
          throw new IllegalStateException("createQueue('not a queue!') raised " + e, e);
        }
      }

      List<PinLaterJob> jobs = new ArrayList<>();
      for (int i = 1; i <= JOBS; i++) {
        jobs.add(new PinLaterJob(utf8("java-" + i)).setPriority((byte) i));
      }
      List<String> descriptors =
          client.enqueueJobs(ctx, new PinLaterEnqueueRequest(queue, jobs)).getJobDescriptors();
      if (descriptors.size() != JOBS) {
        throw new IllegalStateException("enqueue returned " + descriptors);
      }
      Map<String, String> enqueued = new HashMap<>();
      for (int i = 0; i < JOBS; i++) {
        enqueued.put(descriptors.get(i), "java-" + (i + 1));
      }

      // The server may need a moment after createQueue before it serves the queue.
      Map<String, String> dequeued = new HashMap<>();
      long deadline = System.currentTimeMillis() + DEQUEUE_DEADLINE_MS;
      while (dequeued.size() < JOBS) {
        PinLaterDequeueResponse resp =
            client.dequeueJobs(ctx, new PinLaterDequeueRequest(queue, 10));
        if (resp.isSetJobs()) {
          for (Map.Entry<String, ByteBuffer> e : resp.getJobs().entrySet()) {
            String body =
                new String(TBaseHelper.byteBufferToByteArray(e.getValue()), StandardCharsets.UTF_8);
            if (!body.equals(enqueued.get(e.getKey()))) {
              throw new IllegalStateException(
                  "dequeued " + e.getKey() + " with body " + body + ", enqueued " + enqueued);
            }
            dequeued.put(e.getKey(), body);
          }
        }
        if (dequeued.size() < JOBS) {
          if (System.currentTimeMillis() > deadline) {
            throw new IllegalStateException(
                "after " + DEQUEUE_DEADLINE_MS + " ms dequeued only " + dequeued.keySet());
          }
          Thread.sleep(DEQUEUE_PAUSE_MS);
        }
      }

      List<PinLaterJobAckInfo> acks = new ArrayList<>();
      for (String descriptor : descriptors) {
        acks.add(new PinLaterJobAckInfo(descriptor).setAppendCustomStatus(STATUS));
      }
      client.ackDequeuedJobs(ctx, new PinLaterJobAckRequest(queue).setJobsSucceeded(acks));

      Map<String, PinLaterJobInfo> infos =
          client.lookupJobs(ctx, new PinLaterLookupJobRequest(descriptors).setIncludeBody(true));
      for (String descriptor : descriptors) {
        PinLaterJobInfo info = infos.get(descriptor);
        if (info == null) {
          throw new IllegalStateException("lookupJobs left out " + descriptor + ": " + infos);
        }
        String body =
            info.isSetBody() ? new String(info.getBody(), StandardCharsets.UTF_8) : null;
        System.out.println(
            "{\"descriptor\": " + json(info.getJobDescriptor())
                + ", \"state\": " + json(info.getJobState().name())
                + ", \"customStatus\": " + json(info.getCustomStatus())
                + ", \"body\": " + json(body) + "}");
      }
    } finally {
      transport.close();
    }
  }

  private static ByteBuffer utf8(String s) {
    return ByteBuffer.wrap(s.getBytes(StandardCharsets.UTF_8));
  }

  /** A JSON string literal (or null). */
  private static String json(String s) {
    if (s == null) {
      return "null";
    }
    StringBuilder out = new StringBuilder("\"");
    for (char c : s.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }
}
