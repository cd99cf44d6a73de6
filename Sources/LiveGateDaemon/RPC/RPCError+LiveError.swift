// Licensed under the Apache License, Version 2.0.

import LiveGateProtocol
import LiveJSON
import LiveSDK

extension RPCError {
    /// The protocol form of an engine error.
    init(_ error: LiveError) {
        switch error.code {
        case .cloudUnavailable:
            self.init(code: .cloudUnavailable, message: error.message)
        case .unauthenticated:
            self.init(
                code: .cloudUnavailable,
                message: "the cloud refused the daemon's session (\(error.message)); an administrator must fix its credentials"
            )
        case .notFound:
            self.init(code: .notFound, message: error.message)
        case .notPermitted:
            // The engine's message says the cloud refused, and the cloud's says who may not do what: said once.
            self.init(code: .notPermitted, message: error.message)
        case .versionConflict:
            self.init(
                code: .versionConflict,
                message: error.message,
                data: error.currentVersion.map { ["currentVersion": .integer($0)] }
            )
        case .invalidArgument:
            self.init(code: .invalidParams, message: error.message)
        case .messageTooLarge:
            self.init(code: .limitExceeded, message: error.message, data: ["limit": "streamMessageBytes"])
        case let code where StorageFault(code) != nil:
            let fault = StorageFault(code)!
            self.init(
                code: .storageFailure,
                message: "the daemon's storage failed: \(error.message); an administrator must fix it",
                data: ["reason": .string(fault.rawValue)]
            )
        default:
            self.init(code: .internalError, message: "the daemon failed internally (\(error.code)); see its log")
        }
    }
}
