// Licensed under the Apache License, Version 2.0.

/// The fuzz targets: each takes arbitrary bytes, runs them through one parser of the daemon's inputs, and
/// checks what must hold whatever the bytes (a violation is a `FuzzViolation`, which the fuzzer turns into a
/// crash; a crash inside the parser is one already). `livegate-fuzz` runs them under libFuzzer
/// (`scripts/fuzz`), and `FuzzCorpusTests` replays their corpora (`Fuzz/corpus/<target>/`) in the suite.
public enum FuzzTarget: String, CaseIterable, Sendable {
    /// The socket's line framing (`JSONLineFrameDecoder`), the bytes cut into random reads.
    case frame
    /// A request frame: strict JSON, the JSON-RPC envelope, a batch's members, every method's params.
    case request
    /// A message from the cloud's realtime socket, through both decoders the engine uses.
    case realtime
    /// The daemon's configuration file (`livegated.conf`).
    case config

    /// Runs `bytes` through the target.
    /// - Throws: ``FuzzViolation`` when something that must hold does not.
    public func run(_ bytes: [UInt8]) throws(FuzzViolation) {
        switch self {
        case .frame: try FrameFuzz.run(bytes)
        case .request: try RequestFuzz.run(bytes)
        case .realtime: try RealtimeFuzz.run(bytes)
        case .config: try ConfigFuzz.run(bytes)
        }
    }
}

/// A property a fuzz target checks did not hold for some input.
public struct FuzzViolation: Error, CustomStringConvertible, Sendable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

func check(_ condition: Bool, _ message: @autoclosure () -> String) throws(FuzzViolation) {
    if !condition { throw FuzzViolation(message()) }
}
