// Licensed under the Apache License, Version 2.0.

import GRDB

/// What went wrong with the state directory's storage, as a person must act on it.
public enum StorageFault: String, Sendable, Hashable, CaseIterable {
    /// The file system is full (`ENOSPC`, SQLite's `SQLITE_FULL`): free space in the state directory.
    case full
    /// The file system or the file is read-only (`SQLITE_READONLY`): remount it read-write, or fix the owner.
    case readOnly
    /// The disk or the file system failed a read or write (`SQLITE_IOERR`, `SQLITE_CANTOPEN`): see the kernel's log.
    case ioError
    /// The file is not a database, or is damaged (`SQLITE_NOTADB`, `SQLITE_CORRUPT`).
    case damaged

    /// The fault behind `error`, if it is one of the storage's (and not, say, a cancelled task or a decoding error).
    public static func classify(_ error: any Error) -> StorageFault? {
        guard let error = error as? DatabaseError else { return nil }
        switch error.resultCode {
        case .SQLITE_FULL: return .full
        case .SQLITE_READONLY: return .readOnly
        case .SQLITE_IOERR, .SQLITE_CANTOPEN: return .ioError
        case .SQLITE_NOTADB, .SQLITE_CORRUPT: return .damaged
        default: return nil
        }
    }

    /// The engine's error code for it.
    public var code: LiveError.Code {
        switch self {
        case .full: .storageFull
        case .readOnly: .storageReadOnly
        case .ioError: .storageIOError
        case .damaged: .storageDamaged
        }
    }

    /// What to do about it, for messages.
    public var advice: String {
        switch self {
        case .full: "the file system is full: free space there"
        case .readOnly: "the file system or the file is read-only: make it writable by the daemon's user"
        case .ioError: "the disk or file system failed a read or write: see the kernel's log (journalctl -k)"
        case .damaged: "the file is damaged"
        }
    }

    /// The fault of an engine error, if it is a storage error.
    public init?(_ code: LiveError.Code) {
        guard let fault = Self.allCases.first(where: { $0.code == code }) else { return nil }
        self = fault
    }
}

extension LiveError {
    /// The error for `error` thrown while `doing` something with the file at `path`: a storage error (its own
    /// code, the file named, what to do) when the storage failed, else `cacheFailure`.
    static func storage(_ error: any Error, doing: String, path: String) -> LiveError {
        if let fault = StorageFault.classify(error) {
            return LiveError(code: fault.code, message: "\(doing) failed: \(fault.advice) (\(path); \(error))")
        }
        return LiveError(code: .cacheFailure, message: "\(doing) at \(path) failed: \(error)")
    }
}
