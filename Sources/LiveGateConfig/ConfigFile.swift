// Licensed under the Apache License, Version 2.0.

import Foundation
import Logging

/// What a configuration file says. Every member is optional: command-line flags fill or override it.
public struct ConfigFile: Sendable, Equatable {
    public var cloudURL: String?
    public var username: String?
    public var passwordFile: String?
    public var socketPath: String?
    /// `socket-mode`: the permission bits of a socket the daemon binds itself (octal, e.g. 0660).
    public var socketMode: UInt16?
    /// `socket-group`: the group of a socket the daemon binds itself (a name or a numeric id).
    public var socketGroup: UInt32?
    public var stateDirectory: String?
    /// `cache-max-entities`: the cache's size bound (read at start; a reload does not change it).
    public var cacheMaxEntities: Int?
    /// `event-loops`: threads serving clients (read at start); `nil`: `auto` (``DaemonConfiguration/eventLoops``).
    public var eventLoops: Int?
    /// `realtime-ping-seconds`: how often the realtime connection pings the cloud (read at start); `nil`: the
    /// engine's default.
    public var realtimePingSeconds: Int?
    public var logLevel: Logger.Level?
    public var limits = ConnectionLimits()
    public var policy = AccessPolicy()

    public init() {}

    /// Every name a file may use, for the error about an unknown one.
    public static let names = [
        "cloud-url", "username", "password-file", "socket", "socket-mode", "socket-group", "state-dir", "log-level", "max-frame-bytes",
        "max-queued-bytes-per-connection", "max-stall-seconds", "max-connections", "max-tokens-per-connection",
        "max-requests-per-second", "allow-users", "allow-groups", "read-only-users", "read-only-groups", "admin-users", "admin-groups",
        "cache-max-entities",
        "event-loops", "realtime-ping-seconds",
    ]

    /// Reads and validates a file.
    public static func load(path: String) throws(ConfigError) -> ConfigFile {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw ConfigError("cannot read \(path): \(error.localizedDescription)")
        }
        return try parse(text, source: path)
    }

    /// Parses `name = value` lines; `#` starts a comment. Unknown names and invalid values are errors
    /// (a typo must not silently fall back to a default).
    public static func parse(_ text: String, source: String) throws(ConfigError) -> ConfigFile {
        var file = ConfigFile()
        var seen: Set<String> = []
        for (index, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let place = "\(source):\(index + 1)"
            let line = rawLine.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            guard let equals = trimmed.firstIndex(of: "=") else {
                throw ConfigError("\(place): expected 'name = value'")
            }
            let name = trimmed[..<equals].trimmingCharacters(in: .whitespaces)
            let value = trimmed[trimmed.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard !value.isEmpty else { throw ConfigError("\(place): \(name) has no value") }
            guard seen.insert(name).inserted else { throw ConfigError("\(place): \(name) is set twice") }
            switch name {
            case "cloud-url":
                guard value.hasPrefix("http://") || value.hasPrefix("https://"), URL(string: value)?.host != nil else {
                    throw ConfigError("\(place): cloud-url must be an http:// or https:// URL, not \(value)")
                }
                file.cloudURL = value
            case "username": file.username = value
            case "password-file": file.passwordFile = value
            case "socket": file.socketPath = value
            case "socket-mode":
                do {
                    file.socketMode = try socketMode(value)
                } catch {
                    throw ConfigError("\(place): \(error)")
                }
            case "socket-group":
                do {
                    file.socketGroup = try group(value)
                } catch {
                    throw ConfigError("\(place): \(error)")
                }
            case "state-dir": file.stateDirectory = value
            case "cache-max-entities": file.cacheMaxEntities = try integer(value, place, name, in: 1...1_000_000_000)
            case "event-loops":
                if value != "auto" {
                    do {
                        file.eventLoops = try integer(value, place, name, in: 1...256)
                    } catch {
                        throw ConfigError("\(error.description) (or auto)")
                    }
                }
            case "realtime-ping-seconds": file.realtimePingSeconds = try integer(value, place, name, in: 1...3600)
            case "log-level":
                guard let level = Logger.Level(rawValue: value) else {
                    throw ConfigError("\(place): log-level must be one of trace, debug, info, notice, warning, error, critical")
                }
                file.logLevel = level
            case "max-frame-bytes":
                file.limits.maxFrameBytes = try integer(value, place, name, in: 1024...(64 << 20))
            case "max-queued-bytes-per-connection":
                file.limits.maxQueuedBytesPerConnection = try integer(value, place, name, in: 4096...(1 << 30))
            case "max-stall-seconds":
                file.limits.maxStall = .seconds(try integer(value, place, name, in: 1...3600))
            case "max-connections":
                file.limits.maxConnections = try integer(value, place, name, in: 1...1_000_000)
            case "max-tokens-per-connection":
                file.limits.maxTokensPerConnection = try integer(value, place, name, in: 1...10_000_000)
            case "max-requests-per-second":
                file.limits.maxRequestsPerSecond = try integer(value, place, name, in: 0...10_000_000)
            case "allow-users", "allow-groups", "read-only-users", "read-only-groups", "admin-users", "admin-groups":
                do {
                    switch name {
                    case "allow-users": file.policy.allowedUsers = try AccessPolicy.users(value)
                    case "allow-groups": file.policy.allowedGroups = try AccessPolicy.groups(value)
                    case "read-only-users": file.policy.readOnlyUsers = try AccessPolicy.users(value)
                    case "read-only-groups": file.policy.readOnlyGroups = try AccessPolicy.groups(value)
                    case "admin-users": file.policy.adminUsers = try AccessPolicy.users(value)
                    default: file.policy.adminGroups = try AccessPolicy.groups(value)
                    }
                } catch {
                    throw ConfigError("\(place): \(name): \(error)")
                }
            default:
                throw ConfigError("\(place): unknown setting \(name); known: \(names.joined(separator: ", "))")
            }
        }
        return file
    }

    /// Permission bits in octal (`0660`, `660`, `0o660`), at most 0777, readable and writable by the owner.
    public static func socketMode(_ text: String) throws(ConfigError) -> UInt16 {
        var digits = Substring(text)
        if digits.hasPrefix("0o") { digits = digits.dropFirst(2) }
        guard !digits.isEmpty, digits.count <= 4, let mode = UInt16(digits, radix: 8), mode <= 0o777 else {
            throw ConfigError("socket-mode must be permission bits in octal, e.g. 0660, not \(text)")
        }
        guard mode & 0o600 == 0o600 else {
            throw ConfigError("socket-mode \(text) leaves the daemon's own user unable to use its socket; it needs at least 0600")
        }
        return mode
    }

    /// A group name or numeric id (`socket-group`, `--socket-group`).
    public static func group(_ text: String) throws(ConfigError) -> UInt32 {
        do {
            let ids = try AccessPolicy.groups(text)
            guard ids.count == 1, let id = ids.first else { throw ConfigError("expected one group, not \(text)") }
            return id
        } catch {
            throw ConfigError("socket-group: \(error)")
        }
    }

    private static func integer(_ value: String, _ place: String, _ name: String, in range: ClosedRange<Int>) throws(ConfigError) -> Int {
        guard let number = Int(value), range.contains(number) else {
            throw ConfigError("\(place): \(name) must be a whole number from \(range.lowerBound) to \(range.upperBound), not \(value)")
        }
        return number
    }
}

/// A configuration problem, with the file and line it comes from.
public struct ConfigError: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}
