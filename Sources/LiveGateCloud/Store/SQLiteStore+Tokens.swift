// Licensed under the Apache License, Version 2.0.

import GRDB

/// Token grants (see `TokenGrant`), in the `token` table.
extension SQLiteStore {
    func saveTokens(_ grants: [(hash: String, grant: TokenGrant)]) async throws {
        try await pool.write { db in
            try db.execute(sql: "DELETE FROM token WHERE expiresAt <= ?", arguments: [TokenGrant.now()])
            for (hash, grant) in grants {
                try db.execute(
                    sql: "INSERT INTO token (hash, kind, user, expiresAt, pair) VALUES (?, ?, ?, ?, ?)",
                    arguments: [hash, grant.kind.rawValue, grant.user, grant.expiresAt, grant.pair]
                )
            }
        }
    }

    func tokenGrant(_ hash: String, kind: TokenGrant.Kind) async throws -> TokenGrant? {
        try await pool.read { db in try Self.grant(db, hash, kind) }
    }

    func takeRefreshToken(_ hash: String) async throws -> TokenGrant? {
        try await pool.write { db in
            guard let grant = try Self.grant(db, hash, .refresh) else { return nil }
            try db.execute(sql: "DELETE FROM token WHERE hash = ?", arguments: [hash])
            return grant
        }
    }

    func revokeAccessToken(_ hash: String) async throws {
        try await pool.write { db in
            guard let grant = try Self.grant(db, hash, .access) else { return }
            try db.execute(sql: "DELETE FROM token WHERE hash IN (?, ?)", arguments: [hash, grant.pair])
        }
    }

    func expireAccessTokens() async throws {
        try await pool.write { db in
            try db.execute(sql: "UPDATE token SET expiresAt = ? WHERE kind = 'access'", arguments: [TokenGrant.now()])
        }
    }

    private static func grant(_ db: Database, _ hash: String, _ kind: TokenGrant.Kind) throws -> TokenGrant? {
        try Row.fetchOne(db, sql: "SELECT user, expiresAt, pair FROM token WHERE hash = ? AND kind = ?", arguments: [hash, kind.rawValue]).map {
            TokenGrant(kind: kind, user: $0["user"], expiresAt: $0["expiresAt"], pair: $0["pair"])
        }
    }
}
