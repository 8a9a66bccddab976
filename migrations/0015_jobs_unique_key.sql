-- pinledger: online
-- A unique job's key (decision 0037): written when the job is created, never changed.
-- A nullable column without a default: Postgres adds it to the catalog only, without
-- rewriting the table or holding its lock beyond an instant.
ALTER TABLE jobs ADD COLUMN IF NOT EXISTS unique_key text;
