-- The local keeper's key of a deployment that configured none (shred.keeper_url and
-- shred.local_key empty), which serve allows only with the embedded Kafka broker: trying
-- imledger on a laptop. It is kept here so that a restart, `replay` and `export` still unwrap
-- the data keys it wrapped; a deployment with real brokers must configure its key and never
-- writes this row. Keeping the key beside the keys it wraps protects nothing: it is for trying
-- imledger only, and serve says so at every start.

-- +goose Up
CREATE TABLE shred_local_key (
    singleton  boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    key        text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE shred_local_key;
