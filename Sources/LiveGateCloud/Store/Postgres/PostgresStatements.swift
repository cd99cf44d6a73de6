// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import Logging
import PostgresNIO

/// The statements every write or request runs, prepared once per connection (PostgresNIO keeps them by
/// name), so that PostgreSQL does not parse and plan them at every run: as unnamed statements, parsing and
/// binding (which plans) were 0.092 ms of the 0.104 ms a token's grant read took in the server's statement
/// log (Benchmarks.md). Each has a name of its own: PostgresNIO's default is `String(reflecting:)` of the type,
/// worked out at every run of the statement (~1 % of the cloud's CPU with 64 writers).
enum PostgresStatements {
    /// The grant of a token of one kind.
    struct TokenGrant: PostgresPreparedStatement {
        static let name = "livegate.TokenGrant"
        static let sql = "SELECT username, expires_at, pair FROM token WHERE hash = $1 AND kind = $2"
        let hash: String
        let kind: String

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(hash)
            bindings.append(kind)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> (String, Int64, String) {
            try row.decode((String, Int64, String).self)
        }
    }

    /// Takes the write lock for the rest of the transaction.
    struct WriteLock: PostgresPreparedStatement {
        static let name = "livegate.WriteLock"
        static let sql = "SELECT pg_advisory_xact_lock($1)"

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 1)
            bindings.append(PostgresStore.writeLock)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }

    /// A batch's objects by key and the expiry of its writes' access grants, in one statement (one round trip
    /// fewer on the write lane's connection, under the write lock): rows `("e", collection, id, version, data,
    /// created_at, updated_at, deleted, 0)` for the objects, `("g", hash, "", 0, "", "", "", false, expires_at)`
    /// for the access tokens that are there (one not issued or revoked is not).
    struct EntitiesAndGrants: PostgresPreparedStatement {
        static let name = "livegate.EntitiesAndGrants"
        static let sql = """
            SELECT 'e', \(PostgresStore.entityColumns), 0::bigint FROM entity
            WHERE (collection, id) IN (SELECT * FROM unnest($1::text[], $2::text[]))
            UNION ALL
            SELECT 'g', hash, '', 0::bigint, '', '', '', false, expires_at FROM token WHERE hash = ANY($3::text[]) AND kind = 'access'
            """
        let keys: [EntityKey]
        let hashes: [String]

        enum Row {
            case entity(Entity)
            case grant(hash: String, expiresAt: Int64)
        }

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 3)
            bindings.append(keys.map(\.collection))
            bindings.append(keys.map(\.id))
            bindings.append(hashes)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Row {
            let (kind, collection, id, version, data, createdAt, updatedAt, deleted, expiresAt) = try row.decode(
                (String, String, String, Int64, String, String, String, Bool, Int64).self
            )
            guard kind == "e" else { return .grant(hash: collection, expiresAt: expiresAt) }
            return .entity(try PostgresStore.entity(collection, id, version, data, createdAt, updatedAt, deleted))
        }
    }

    /// The writes remembered under these idempotency keys: user, key, the entity stored (JSON text), outcome, and
    /// the request's fingerprint (null for keys remembered before fingerprints).
    struct AppliedWrites: PostgresPreparedStatement {
        static let name = "livegate.AppliedWrites.v2"
        static let sql = """
            SELECT username, key, entity, outcome, fingerprint FROM applied_write
            WHERE (username, key) IN (SELECT * FROM unnest($1::text[], $2::text[]))
            """
        let keys: [IdempotencyKey]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(keys.map(\.user))
            bindings.append(keys.map(\.key))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> (String, String, String, String, String?) {
            try row.decode((String, String, String, String, String?).self)
        }
    }

    /// Stores each object's last state (one row per object: an upsert may not touch a row twice); the data
    /// as JSON text.
    struct StoreEntities: PostgresPreparedStatement {
        static let name = "livegate.StoreEntities"
        static let sql = """
            INSERT INTO entity (collection, id, version, data, created_at, updated_at, deleted)
            SELECT c, i, v, d::jsonb, ca, ua, del FROM unnest(
                $1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[], $7::boolean[]
            ) AS w(c, i, v, d, ca, ua, del)
            ON CONFLICT (collection, id) DO UPDATE SET version = excluded.version, data = excluded.data,
                created_at = excluded.created_at, updated_at = excluded.updated_at, deleted = excluded.deleted
            """
        let entities: [Entity]
        let data: [String]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 7)
            bindings.append(entities.map(\.collection))
            bindings.append(entities.map(\.id))
            bindings.append(entities.map(\.version))
            bindings.append(data)
            bindings.append(entities.map(\.createdAt))
            bindings.append(entities.map(\.updatedAt))
            bindings.append(entities.map(\.deleted))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }

    /// Adds to collections' counts of live objects.
    struct CountLive: PostgresPreparedStatement {
        static let name = "livegate.CountLive"
        static let sql = """
            INSERT INTO collection_size (collection, live)
            SELECT * FROM unnest($1::text[], $2::bigint[])
            ON CONFLICT (collection) DO UPDATE SET live = collection_size.live + excluded.live
            """
        let collections: [String]
        let added: [Int64]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(collections)
            bindings.append(added)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }

    /// Appends events in the order given (each entity as JSON text, the data before it or "" for none);
    /// returns their sequence numbers.
    struct AppendEvents: PostgresPreparedStatement {
        static let name = "livegate.AppendEvents"
        static let sql = """
            INSERT INTO event (collection, id, version, entity, previous)
            SELECT c, i, v, e, nullif(p, '') FROM unnest(
                $1::text[], $2::text[], $3::bigint[], $4::text[], $5::text[]
            ) WITH ORDINALITY AS w(c, i, v, e, p, n) ORDER BY n
            RETURNING seq
            """
        let entities: [Entity]
        let texts: [String]
        let previous: [String]

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 5)
            bindings.append(entities.map(\.collection))
            bindings.append(entities.map(\.id))
            bindings.append(entities.map(\.version))
            bindings.append(texts)
            bindings.append(previous)
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws -> Int64 {
            try row.decode(Int64.self)
        }
    }

    /// Wakes every instance's event pump at commit with the last sequence number appended.
    struct NotifyEvents: PostgresPreparedStatement {
        static let name = "livegate.NotifyEvents"
        static let sql = "SELECT pg_notify($1, $2)"
        let last: Int64

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 2)
            bindings.append(PostgresStore.channel)
            bindings.append(String(last))
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }

    /// Records the idempotency keys of writes applied (each entity as JSON text) at `at` (milliseconds).
    struct RememberWrites: PostgresPreparedStatement {
        static let name = "livegate.RememberWrites.v2"
        static let sql = """
            INSERT INTO applied_write (username, key, entity, outcome, at, fingerprint)
            SELECT u, k, e, o, $5::bigint, NULLIF(f, '') FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $6::text[]) AS w(u, k, e, o, f)
            """
        let keys: [IdempotencyKey]
        let entities: [String]
        let outcomes: [String]
        let at: Int64

        func makeBindings() throws -> PostgresBindings {
            var bindings = PostgresBindings(capacity: 5)
            bindings.append(keys.map(\.user))
            bindings.append(keys.map(\.key))
            bindings.append(entities)
            bindings.append(outcomes)
            bindings.append(at)
            bindings.append(keys.map { $0.fingerprint ?? "" })  // '' for none: NULLIF below
            return bindings
        }

        func decodeRow(_ row: PostgresRow) throws {}
    }
}

extension PostgresConnection {
    /// Runs a prepared statement whose rows (if any) carry nothing, reading them to its end. (PostgresNIO's
    /// `execute` that returns the command tag traps on a statement that returns rows, as a `SELECT` does.)
    func run<Statement: PostgresPreparedStatement>(_ statement: Statement, logger: Logger) async throws where Statement.Row == () {
        let rows: AsyncThrowingMapSequence<PostgresRowSequence, ()> = try await execute(statement, logger: logger)
        for try await _ in rows {}
    }
}
