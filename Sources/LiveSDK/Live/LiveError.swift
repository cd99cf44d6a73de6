// Licensed under the Apache License, Version 2.0.

/// An error of the engine: a stable code and a message a person can act on.
public struct LiveError: Error, Sendable, Equatable, CustomStringConvertible {
    public struct Code: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// The cloud could not be reached, or answered with a server error.
        public static let cloudUnavailable = Code(rawValue: "cloudUnavailable")
        /// The cloud refused the session's credentials.
        public static let unauthenticated = Code(rawValue: "unauthenticated")
        /// The cloud's permissions do not let this session's user read (or write) the collection.
        public static let notPermitted = Code(rawValue: "notPermitted")
        /// No such object.
        public static let notFound = Code(rawValue: "notFound")
        /// A write's `ifVersion` did not match the stored version (see ``LiveError/currentVersion``).
        public static let versionConflict = Code(rawValue: "versionConflict")
        /// The request was malformed (bad names, data that is not a JSON object).
        public static let invalidArgument = Code(rawValue: "invalidArgument")
        /// A stream message was over the cloud's size limit, and was not delivered.
        public static let messageTooLarge = Code(rawValue: "messageTooLarge")
        /// The local cache failed.
        public static let cacheFailure = Code(rawValue: "cacheFailure")
        /// The state directory's file system is full (see ``StorageFault``).
        public static let storageFull = Code(rawValue: "storageFull")
        /// The state directory's file system, or a file in it, is read-only.
        public static let storageReadOnly = Code(rawValue: "storageReadOnly")
        /// The disk or file system failed a read or a write.
        public static let storageIOError = Code(rawValue: "storageIOError")
        /// A file in the state directory is not a database or is damaged.
        public static let storageDamaged = Code(rawValue: "storageDamaged")
    }

    public var code: Code
    public var message: String
    /// On ``Code/versionConflict``: the version stored in the cloud (0 when the object does not exist).
    public var currentVersion: Int64?

    public init(code: Code, message: String, currentVersion: Int64? = nil) {
        self.code = code
        self.message = message
        self.currentVersion = currentVersion
    }

    public var description: String { "\(code): \(message)" }
}
