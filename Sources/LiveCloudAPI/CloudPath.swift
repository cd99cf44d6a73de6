// Licensed under the Apache License, Version 2.0.

/// Paths of the cloud API, in one place.
public enum CloudPath {
    public static let login = "/v1/auth/login"
    public static let refresh = "/v1/auth/refresh"
    public static let logout = "/v1/auth/logout"
    public static let stats = "/v1/stats"
    public static let realtime = "/v1/realtime"
    /// `GET`: a page of a query over the collection.
    public static func objects(_ collection: String) -> String { "/v1/collections/\(collection)/objects" }
    public static func object(_ key: EntityKey) -> String { "/v1/collections/\(key.collection)/objects/\(key.id)" }
}
