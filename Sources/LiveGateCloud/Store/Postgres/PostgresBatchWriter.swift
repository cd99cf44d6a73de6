// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveCloudAPI
import LiveJSON
import Logging
import PostgresNIO

/// Object writes in batches (``GroupCommit``): one transaction under the write lock applies every write
/// that waited, in a fixed number of statements whatever the batch's size (each write used to cost seven
/// round trips and a commit of its own).
///
/// The writes are decided here, in order, as each would be alone: the batch reads the objects and the
/// idempotency keys it touches once, then applies each write to what the writes before it left (its
/// precondition is checked against that, and a key used twice in one batch answers the second use as a
/// retry of the first). A write whose access grant came from the instance's memory (``PendingWrite/grant``)
/// is first checked against the token table, in the statement that reads the batch's objects: a token another instance revoked
/// or expired writes nothing, and is answered 401 as a request with it would be. Then one statement stores each object's last state, one appends the events in the
/// writes' order (their sequence numbers follow it, under the lock), one records the idempotency keys, and
/// one `NOTIFY` wakes the event pumps at commit.
struct PostgresBatchWriter: Sendable {
    let client: PostgresClient
    let logger: Logger
    /// How many events the log keeps (see ``PostgresStore/eventRetention``).
    let eventRetention: Int64

    /// A write waiting for its batch.
    struct PendingWrite: Sendable {
        let key: EntityKey
        let change: EntityChange
        let ifVersion: Int64?
        let idempotency: IdempotencyKey?
        /// The hash of the access token whose grant this transaction confirms (`CloudStore.write`), if any.
        let grant: String?
        let now: String
    }

    func commit(_ batch: [PendingWrite]) async -> [Result<WriteOutcome, any Error>] {
        do {
            return try await client.withTransaction(logger: logger) { connection in
                try await connection.run(PostgresStatements.WriteLock(), logger: logger)
                return try await apply(batch, on: connection)
            }
        } catch {
            return Array(repeating: .failure(error), count: batch.count)
        }
    }

    private func apply(_ batch: [PendingWrite], on connection: PostgresConnection) async throws -> [Result<WriteOutcome, any Error>] {
        let read = try await entitiesAndGrants(Array(Set(batch.map(\.key))), Array(Set(batch.compactMap(\.grant))), on: connection)
        var current = read.entities
        let grants = read.grants
        let now = TokenGrant.now()
        var remembered = try await appliedWrites(batch.compactMap(\.idempotency), on: connection)
        var outcomes: [Result<WriteOutcome, any Error>] = []
        var stored: [EntityKey: Entity] = [:]
        var events: [(entity: Entity, previous: String?)] = []
        var newlyRemembered: [(idempotency: IdempotencyKey, entity: Entity, outcome: String)] = []
        for write in batch {
            if let grant = write.grant {
                guard let expiresAt = grants[grant] else {
                    outcomes.append(.failure(CloudHTTPError.unauthenticated))
                    continue
                }
                guard expiresAt > now else {
                    outcomes.append(.failure(CloudHTTPError.tokenExpired))
                    continue
                }
            }
            if let idempotency = write.idempotency, let (entity, outcome, fingerprint) = remembered[idempotency] {
                let sameRequest = entity.key == write.key && idempotency.isSameRequest(as: fingerprint)
                outcomes.append(
                    .success(sameRequest ? IdempotencyKey.replayed(entity, outcome: outcome) : .keyReused(idempotency.key, by: entity.key))
                )
                continue
            }
            let before = current[write.key]
            switch write.change.apply(to: before, key: write.key, ifVersion: write.ifVersion, now: write.now) {
            case .refuse(let outcome):
                outcomes.append(.success(outcome))
            case .store(let entity):
                current[write.key] = entity
                stored[write.key] = entity
                events.append((entity, try LoggedEvent.previousText(of: before)))
                let outcome = EntityChange.outcome(storing: entity, over: before)
                if let idempotency = write.idempotency, let applied = outcome.applied {
                    remembered[idempotency] = (applied.entity, applied.outcome, idempotency.fingerprint)
                    newlyRemembered.append((idempotency, applied.entity, applied.outcome))
                }
                outcomes.append(.success(outcome))
            }
        }
        guard !events.isEmpty else { return outcomes }
        try await store(Array(stored.values), on: connection)
        try await count(events, on: connection)
        let seqs = try await appendEvents(events, on: connection)
        try await remember(newlyRemembered, pruning: seqs.contains { $0 % 64 == 0 }, on: connection)
        return outcomes
    }

    /// The objects by key, and when each of these access tokens expires, by hash (a token not issued, or
    /// revoked, is not there): one statement.
    private func entitiesAndGrants(
        _ keys: [EntityKey],
        _ hashes: [String],
        on connection: PostgresConnection
    ) async throws -> (entities: [EntityKey: Entity], grants: [String: Int64]) {
        var entities: [EntityKey: Entity] = [:]
        var grants: [String: Int64] = [:]
        for try await row in try await connection.execute(PostgresStatements.EntitiesAndGrants(keys: keys, hashes: hashes), logger: logger) {
            switch row {
            case .entity(let entity): entities[entity.key] = entity
            case .grant(let hash, let expiresAt): grants[hash] = expiresAt
            }
        }
        return (entities, grants)
    }

    /// The writes remembered under these idempotency keys: the entity each stored, and its outcome's name.
    private func appliedWrites(_ keys: [IdempotencyKey], on connection: PostgresConnection) async throws
        -> [IdempotencyKey: (entity: Entity, outcome: String, fingerprint: String?)]
    {
        guard !keys.isEmpty else { return [:] }
        var found: [IdempotencyKey: (entity: Entity, outcome: String, fingerprint: String?)] = [:]
        for try await (user, key, text, outcome, fingerprint) in try await connection.execute(
            PostgresStatements.AppliedWrites(keys: keys),
            logger: logger
        ) {
            found[IdempotencyKey(user: user, key: key)] = (try CloudJSON.decode(Entity.self, from: text), outcome, fingerprint)
        }
        return found
    }

    /// Stores each written object's last state (one row per object: an upsert may not touch a row twice).
    private func store(_ entities: [Entity], on connection: PostgresConnection) async throws {
        let data = try entities.map { try StoreText.encode($0.data) }
        try await connection.run(PostgresStatements.StoreEntities(entities: entities, data: data), logger: logger)
    }

    /// Keeps each collection's count of live objects (`collection_size`): +1 for an object created, -1 for
    /// one deleted.
    private func count(_ events: [(entity: Entity, previous: String?)], on connection: PostgresConnection) async throws {
        var joined: [String: Int64] = [:]
        for (entity, previous) in events {
            // `previous` is the data before the write, `nil` when the object did not exist or was deleted.
            joined[entity.collection, default: 0] += (entity.deleted ? 0 : 1) - (previous == nil ? 0 : 1)
        }
        let changed = joined.filter { $0.value != 0 }
        guard !changed.isEmpty else { return }
        try await connection.run(
            PostgresStatements.CountLive(collections: Array(changed.keys), added: Array(changed.values)),
            logger: logger
        )
    }

    /// Appends the events in order (their sequence numbers are drawn in that order, under the write lock),
    /// asks for the `NOTIFY` that wakes the pumps at commit, and prunes the log past its retention when a
    /// sequence number crosses a multiple of 64. Returns the sequence numbers.
    private func appendEvents(_ events: [(entity: Entity, previous: String?)], on connection: PostgresConnection) async throws -> [Int64] {
        let texts = try events.map { try StoreText.encode($0.entity) }
        // `previous` is JSON text, never empty: "" stands for none.
        let previous = events.map { $0.previous ?? "" }
        var seqs: [Int64] = []
        for try await seq in try await connection.execute(
            PostgresStatements.AppendEvents(entities: events.map(\.entity), texts: texts, previous: previous),
            logger: logger
        ) {
            seqs.append(seq)
        }
        seqs.sort()
        guard let last = seqs.last else { return seqs }
        try await connection.run(PostgresStatements.NotifyEvents(last: last), logger: logger)
        if seqs.contains(where: { $0 % 64 == 0 }) {
            // Keep the log bounded: every 64 events, drop what is past the retention.
            try await connection.query("DELETE FROM event WHERE seq <= \(last - eventRetention)", logger: logger)
        }
        return seqs
    }

    /// Records the idempotency keys of the writes applied, and now and then forgets those past their retention.
    private func remember(
        _ writes: [(idempotency: IdempotencyKey, entity: Entity, outcome: String)],
        pruning: Bool,
        on connection: PostgresConnection
    ) async throws {
        let now = StoreText.milliseconds()
        if pruning {
            try await connection.query("DELETE FROM applied_write WHERE at < \(now - IdempotencyKey.retentionMilliseconds)", logger: logger)
        }
        guard !writes.isEmpty else { return }
        let entities = try writes.map { try StoreText.encode($0.entity) }
        try await connection.run(
            PostgresStatements.RememberWrites(keys: writes.map(\.idempotency), entities: entities, outcomes: writes.map(\.outcome), at: now),
            logger: logger
        )
    }
}
