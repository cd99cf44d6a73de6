// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON

/// A write's body (`PUT`, `PATCH`), read strictly: `{"data": …, "ifVersion"?: a whole number, 0 or more}` and
/// nothing else (`3.0` is a whole number, as JSON Schema's `integer` says). A misspelt or unknown member, or an
/// `ifVersion` of `null` or below 0, would otherwise be dropped and the write made without the condition its
/// client asked for.
enum WriteBody {
    static func read(_ value: JSONValue) throws -> PutObjectRequest {
        guard let members = value.objectValue else {
            throw CloudHTTPError.badRequest(#"the request body must be a JSON object: {"data": {…}, "ifVersion": n}"#)
        }
        try BodyShape.write.check(value)
        guard let data = members["data"] else { throw CloudHTTPError.badRequest(#"the request body lacks the member "data""#) }
        var ifVersion: Int64?
        if let condition = members["ifVersion"] {
            guard case .number(let number) = condition, let version = number.integerValue(Int64.self), version >= 0 else {
                throw CloudHTTPError.badRequest(
                    #""ifVersion" must be a whole number, 0 or more (0: the object must not exist); leave it out for no condition"#
                )
            }
            ifVersion = version
        }
        return PutObjectRequest(data: data, ifVersion: ifVersion)
    }
}

/// Values the cloud stores: any JSON but the character U+0000 in a string or a name, which PostgreSQL's text and
/// `jsonb` cannot hold. Refused on every store alike (400 naming where), so that data valid on one is valid on all.
enum StorableValue {
    static func check(_ value: JSONValue, what: String) throws {
        if let path = nulPath(value, at: what) {
            throw CloudHTTPError.badRequest("\(path) holds the character U+0000, which the cloud cannot store: leave it out")
        }
    }

    private static func nulPath(_ value: JSONValue, at path: String) -> String? {
        switch value {
        case .string(let text): return text.utf8.contains(0) ? path : nil
        case .array(let items):
            for (index, item) in items.enumerated() {
                if let found = nulPath(item, at: "\(path)[\(index)]") { return found }
            }
            return nil
        case .object(let members):
            for (name, member) in members {
                if name.utf8.contains(0) { return "a name in \(path)" }
                if let found = nulPath(member, at: "\(path).\(name)") { return found }
            }
            return nil
        case .null, .bool, .number: return nil
        }
    }
}
