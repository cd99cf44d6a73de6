// Licensed under the Apache License, Version 2.0.

import LiveJSON

extension ObjectObserveParams {
    /// The params read straight from the parsed request, for the common case: every member this method takes
    /// present with its type (unknown members ignored, as the `Decodable` conformance ignores them). `nil` for
    /// anything else (a member missing, mistyped or `null`, an integer beyond 2^53): the conformance then
    /// decides, and says what is wrong. Where both read the params, they read the same (the tests check it
    /// over random params); this one without the decoder's containers, a thousand requests at a time.
    public init?(reading params: JSONValue?) {
        guard case .object(let members)? = params,
            case .string(let collection)? = members["collection"],
            case .string(let id)? = members["id"]
        else { return nil }
        self.init(collection: collection, id: id)
        guard members.count > 2 else { return }
        if let once = members["once"] {
            guard case .bool(let flag) = once else { return nil }
            self.once = flag
        }
        if let policy = members["policy"] {
            guard case .string(let raw) = policy, let read = ObservePolicy(rawValue: raw) else { return nil }
            self.policy = read
        }
        if let since = members["sinceVersion"] {
            guard case .number(let number) = since, let version = Self.version(number) else { return nil }
            sinceVersion = version
        }
        if let fields = members["fields"] {
            guard case .array(let items) = fields else { return nil }
            var names: [String] = []
            names.reserveCapacity(items.count)
            for item in items {
                guard case .string(let name) = item else { return nil }
                names.append(name)
            }
            self.fields = names
        }
    }

    /// `sinceVersion` as the `Decodable` conformance takes it: a whole number within `Int64`; `nil` for any other.
    static func version(_ number: JSONNumber) -> Int64? {
        number.integerValue(Int64.self)
    }
}
