// Licensed under the Apache License, Version 2.0.

import LiveCloudAPI
import LiveJSON

/// A write's body (`PUT`, `PATCH`), read strictly: `{"data": …, "ifVersion"?: a whole number, 0 or more}` and
/// nothing else. A misspelt or unknown member, or an `ifVersion` of `null` or below 0, would otherwise be dropped
/// and the write made without the condition its client asked for.
enum WriteBody {
    static func read(_ value: JSONValue) throws -> PutObjectRequest {
        guard let members = value.objectValue else {
            throw CloudHTTPError.badRequest(#"the request body must be a JSON object: {"data": {…}, "ifVersion": n}"#)
        }
        if let unknown = members.keys.first(where: { $0 != "data" && $0 != "ifVersion" }) {
            throw CloudHTTPError.badRequest(#"the request body has an unknown member "\#(unknown)": it takes "data" and "ifVersion" only"#)
        }
        guard let data = members["data"] else { throw CloudHTTPError.badRequest(#"the request body lacks the member "data""#) }
        var ifVersion: Int64?
        if let condition = members["ifVersion"] {
            guard let version = condition.int64Value, version >= 0 else {
                throw CloudHTTPError.badRequest(
                    #""ifVersion" must be a whole number, 0 or more (0: the object must not exist); leave it out for no condition"#
                )
            }
            ifVersion = version
        }
        return PutObjectRequest(data: data, ifVersion: ifVersion)
    }
}
