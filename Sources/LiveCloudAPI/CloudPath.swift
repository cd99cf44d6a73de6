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
    /// `POST`: many objects, of any collections, read in one request (``ReadObjectsRequest``).
    public static let readObjects = "/v1/objects/read"
    /// `GET`: what the caller may do with the collection (``CollectionAccess``).
    public static func access(_ collection: String) -> String { "/v1/collections/\(collection)/access" }
    /// `GET`: the streams. `PUT /v1/streams/{stream}` (admins) creates one.
    public static let streams = "/v1/streams"
    public static func stream(_ name: String) -> String { "/v1/streams/\(name)" }
    /// `GET` and `PUT`: the ACL of a stream for one user.
    public static func streamACL(_ stream: String, user: String) -> String { "/v1/streams/\(stream)/users/\(user)/acl" }
    /// `POST`: send a message to the user on the stream.
    public static func streamMessages(_ stream: String, user: String) -> String { "/v1/streams/\(stream)/users/\(user)/messages" }
}
