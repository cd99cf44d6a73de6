// Licensed under the Apache License, Version 2.0.

import PostgresNIO

/// Token grants (see `TokenGrant`), in the `token` table, which every instance sharing the database reads.
extension PostgresStore {
    func saveTokens(_ grants: [(hash: String, grant: TokenGrant)]) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("DELETE FROM token WHERE expires_at <= \(TokenGrant.now())", logger: logger)
            for (hash, grant) in grants {
                try await connection.query(
                    """
                    INSERT INTO token (hash, kind, username, expires_at, pair)
                    VALUES (\(hash), \(grant.kind.rawValue), \(grant.user), \(grant.expiresAt), \(grant.pair))
                    """,
                    logger: logger
                )
            }
        }
    }

    func tokenGrant(_ hash: String, kind: TokenGrant.Kind) async throws -> TokenGrant? {
        // Every row read (at most one: the hash is the key), so that the sequence ends and frees its connection.
        var grants: [TokenGrant] = []
        for try await (user, expiresAt, pair) in try await client.execute(
            PostgresStatements.TokenGrant(hash: hash, kind: kind.rawValue),
            logger: logger
        ) {
            grants.append(TokenGrant(kind: kind, user: user, expiresAt: expiresAt, pair: pair))
        }
        return grants.first
    }

    func takeRefreshToken(_ hash: String) async throws -> TokenGrant? {
        // One statement: two instances given the same refresh token at once cannot both use it.
        try await Self.grants(
            .refresh,
            try await client.query(
                "DELETE FROM token WHERE hash = \(hash) AND kind = 'refresh' RETURNING username, expires_at, pair",
                logger: logger
            )
        ).first
    }

    func revokeAccessToken(_ hash: String) async throws {
        try await client.query(
            "DELETE FROM token WHERE hash = \(hash) OR hash = (SELECT pair FROM token WHERE hash = \(hash) AND kind = 'access')",
            logger: logger
        )
    }

    func expireAccessTokens() async throws {
        try await client.query("UPDATE token SET expires_at = \(TokenGrant.now()) WHERE kind = 'access'", logger: logger)
    }

    private static func grants(_ kind: TokenGrant.Kind, _ rows: PostgresRowSequence) async throws -> [TokenGrant] {
        var grants: [TokenGrant] = []
        for try await (user, expiresAt, pair) in rows.decode((String, Int64, String).self) {
            grants.append(TokenGrant(kind: kind, user: user, expiresAt: expiresAt, pair: pair))
        }
        return grants
    }
}
