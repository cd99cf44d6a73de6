// Licensed under the Apache License, Version 2.0.

import Logging
import PostgresNIO

/// The PostgreSQL schema, as numbered migrations applied in order. Instances starting together take an
/// advisory lock, so exactly one applies what is missing; `livegate_schema` records the version reached.
enum PostgresSchema {
    /// Each migration is a list of statements (the extended protocol runs one statement per query).
    static let migrations: [[String]] = [
        // v1: entities, the event log, streams and their ACLs.
        [
            """
            CREATE TABLE entity (
                collection text COLLATE "C" NOT NULL,
                id text COLLATE "C" NOT NULL,
                version bigint NOT NULL,
                data jsonb NOT NULL,
                created_at text NOT NULL,
                updated_at text NOT NULL,
                deleted boolean NOT NULL DEFAULT false,
                PRIMARY KEY (collection, id)
            )
            """,
            """
            CREATE TABLE event (
                seq bigserial PRIMARY KEY,
                collection text COLLATE "C" NOT NULL,
                id text COLLATE "C" NOT NULL,
                version bigint NOT NULL,
                entity text NOT NULL
            )
            """,
            "CREATE INDEX event_by_object ON event (collection, id, seq)",
            "CREATE INDEX event_by_collection ON event (collection, seq)",
            "CREATE TABLE stream (name text PRIMARY KEY, created_at text NOT NULL)",
            """
            CREATE TABLE stream_acl (
                stream text NOT NULL REFERENCES stream (name) ON DELETE CASCADE,
                username text NOT NULL,
                acl text NOT NULL,
                PRIMARY KEY (stream, username)
            )
            """,
            // Arrays and objects sort by their compact JSON text with sorted keys (`QueryPosition`); jsonb's
            // own text form has spaces and its own key order, so build the compact form.
            """
            CREATE FUNCTION livegate_compact(value jsonb) RETURNS text
            LANGUAGE plpgsql IMMUTABLE STRICT AS $$
            BEGIN
                CASE jsonb_typeof(value)
                WHEN 'object' THEN
                    RETURN '{' || coalesce((
                        SELECT string_agg(to_jsonb(key)::text || ':' || livegate_compact(item), ',' ORDER BY key COLLATE "C")
                        FROM jsonb_each(value) AS members (key, item)), '') || '}';
                WHEN 'array' THEN
                    RETURN '[' || coalesce((
                        SELECT string_agg(livegate_compact(item), ',' ORDER BY position)
                        FROM jsonb_array_elements(value) WITH ORDINALITY AS elements (item, position)), '') || ']';
                ELSE
                    RETURN value::text;
                END CASE;
            END
            $$
            """,
        ],
        // v2: the data before each write, so query topics hear of objects leaving them.
        ["ALTER TABLE event ADD COLUMN previous text"],
        // v3: token grants, under the tokens' SHA-256, so every instance honours every instance's tokens.
        [
            """
            CREATE TABLE token (
                hash text PRIMARY KEY,
                kind text NOT NULL,
                username text NOT NULL,
                expires_at bigint NOT NULL,
                pair text NOT NULL
            )
            """,
            "CREATE INDEX token_by_expiry ON token (expires_at)",
        ],
        // v4: writes applied under an Idempotency-Key, so a retried request is answered, not applied again.
        [
            """
            CREATE TABLE applied_write (
                username text NOT NULL,
                key text NOT NULL,
                entity text NOT NULL,
                outcome text NOT NULL,
                at bigint NOT NULL,
                PRIMARY KEY (username, key)
            )
            """,
            "CREATE INDEX applied_write_by_age ON applied_write (at)",
        ],
        // v5: how many live objects each collection holds, kept by every write (a query without a filter
        // counts its result without a scan).
        [
            "CREATE TABLE collection_size (collection text COLLATE \"C\" PRIMARY KEY, live bigint NOT NULL)",
            "INSERT INTO collection_size (collection, live) SELECT collection, count(*) FROM entity WHERE NOT deleted GROUP BY collection",
        ],
        // v6: numbers sort exactly (`numeric`, not `float8`): the sort indexes made over the old terms are dropped,
        // and made again over the new ones by the first query that needs each.
        [
            """
            DO $$ DECLARE name text; BEGIN
                FOR name IN SELECT indexname FROM pg_indexes
                    WHERE schemaname = current_schema() AND tablename = 'entity' AND indexname LIKE 'lg\\_sort\\_%'
                LOOP
                    EXECUTE format('DROP INDEX %I', name);
                END LOOP;
            END $$
            """
        ],
        // v7: the request each idempotency key was applied for (`IdempotencyKey.fingerprint`).
        ["ALTER TABLE applied_write ADD COLUMN fingerprint text"],
    ]

    /// An advisory lock key of the schema's own ("lg-schem").
    static let migrationLock: Int64 = 0x6c67_2d73_6368_656d

    /// Applies the migrations the database lacks, in one transaction.
    static func migrate(_ client: PostgresClient, logger: Logger) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(\(migrationLock))", logger: logger)
            try await connection.query("CREATE TABLE IF NOT EXISTS livegate_schema (version integer NOT NULL)", logger: logger)
            var current = 0
            for try await version in try await connection.query("SELECT max(version) FROM livegate_schema", logger: logger).decode(Int?.self) {
                current = version ?? 0
            }
            guard current <= migrations.count else {
                throw PostgresStoreError("the database's schema is version \(current), newer than this livegate-cloud knows (\(migrations.count))")
            }
            for (index, statements) in migrations.enumerated().dropFirst(current) {
                for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await connection.query("INSERT INTO livegate_schema (version) VALUES (\(index + 1))", logger: logger)
                logger.info("PostgreSQL schema migrated", metadata: ["version": "\(index + 1)"])
            }
        }
    }
}

/// A PostgreSQL store problem a person can act on.
struct PostgresStoreError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
