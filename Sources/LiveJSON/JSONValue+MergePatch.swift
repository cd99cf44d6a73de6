// Licensed under the Apache License, Version 2.0.

extension JSONValue {
    /// Applies a JSON merge patch (RFC 7386): members of an object patch replace the target's, a `null`
    /// member removes one, nested objects merge recursively, and any other patch replaces the whole value.
    public func merging(patch: JSONValue) -> JSONValue {
        guard case .object(let changes) = patch else { return patch }
        var result: JSONObject
        if case .object(let members) = self { result = members } else { result = JSONObject() }
        for (key, change) in changes {
            if change == .null {
                result.removeValue(forKey: key)
            } else {
                result[key] = (result[key] ?? .null).merging(patch: change)
            }
        }
        return .object(result)
    }
}
