// Licensed under the Apache License, Version 2.0.

/// Who may read and who may write which collection. Pure.
///
/// The permissions file has one rule per line, `COLLECTION ACCESS USERS`: the collection (or `*` for every
/// collection), `read` or `write`, and a comma-separated list of user names (or `*` for every user).
/// Writing does not imply reading. A user may do what some rule for the collection or for `*` allows, and
/// nothing else. Without a permissions file every signed-in user may read and write everything.
///
/// ```
/// # collection  access  users
/// *             read    *
/// notes         write   alice,bob
/// audit         read    alice
/// ```
public struct Permissions: Sendable, Equatable {
    public enum Access: String, Sendable {
        case read, write
    }

    struct Rule: Sendable, Equatable {
        let collection: String
        let access: Access
        let users: Set<String>
    }

    private let rules: [Rule]?

    /// Everyone signed in may do everything.
    public static let open = Permissions(rules: nil)

    private init(rules: [Rule]?) { self.rules = rules }

    /// Parses a permissions file's text; `path` names it in errors (which give the line and the problem).
    public init(parsing text: String, path: String) throws(PermissionsError) {
        var rules: [Rule] = []
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let content = line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let fields = content.split(whereSeparator: { $0 == " " || $0 == "\t" })
            if fields.isEmpty { continue }
            let place = "\(path):\(number + 1)"
            guard fields.count == 3 else {
                throw PermissionsError("\(place): expected 'COLLECTION read|write USERS', got \(fields.count) fields")
            }
            guard let access = Access(rawValue: String(fields[1])) else {
                throw PermissionsError("\(place): the access must be read or write, not \(fields[1])")
            }
            let collection = String(fields[0])
            let users = Set(fields[2].split(separator: ",").map(String.init))
            guard collection == "*" || collection.allSatisfy({ $0.isLetter || $0.isNumber || "_-.".contains($0) }), !users.isEmpty
            else { throw PermissionsError("\(place): invalid collection name or user list") }
            rules.append(Rule(collection: collection, access: access, users: users))
        }
        self.rules = rules
    }

    /// Whether `user` may `access` the collection.
    public func allows(_ user: String, _ access: Access, _ collection: String) -> Bool {
        guard let rules else { return true }
        return rules.contains { rule in
            rule.access == access && (rule.collection == "*" || rule.collection == collection)
                && (rule.users.contains("*") || rule.users.contains(user))
        }
    }
}

public struct PermissionsError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
