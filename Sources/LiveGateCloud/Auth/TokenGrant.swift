// Licensed under the Apache License, Version 2.0.

import Crypto
import Foundation

/// What a token grants, as the store keeps it: under the SHA-256 of the token (the token itself is never
/// stored), so every instance sharing the store honours the tokens any of them issued, and a restarted
/// instance those it issued before.
struct TokenGrant: Sendable, Equatable {
    enum Kind: String, Sendable {
        case access, refresh
    }

    let kind: Kind
    let user: String
    /// Milliseconds since 1970 (wall clock: instances on several machines compare it).
    let expiresAt: Int64
    /// The hash of the token issued with it (an access token's refresh token and the other way round),
    /// revoked with it at logout.
    let pair: String

    var isExpired: Bool { expiresAt <= Self.now() }

    static func now() -> Int64 { StoreText.milliseconds() }

    private static let hexDigits = Array("0123456789abcdef".utf8)

    /// The hex SHA-256 of a token: how the store names it.
    /// Every request pays for it: written out by hand (`String(format:)` per byte cost about a tenth of a
    /// request's CPU in the cloud's profile).
    static func hash(_ token: String) -> String {
        let digits = hexDigits
        let digest = SHA256.hash(data: Array(token.utf8))
        return String(unsafeUninitializedCapacity: SHA256.byteCount * 2) { text in
            var index = 0
            for byte in digest {
                text[index] = digits[Int(byte >> 4)]
                text[index + 1] = digits[Int(byte & 0x0f)]
                index += 2
            }
            return index
        }
    }
}
