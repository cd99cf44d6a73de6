// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveJSON

/// Decoding what the cloud sends: LiveJSON's parser first (fast, and it bounds nesting), Foundation's
/// `JSONDecoder` for what it refuses (an integer beyond 2^53, which LiveJSON's decoder will not round).
///
/// A document nested deeper than ``JSONValue/maxParsingDepth`` never reaches `JSONDecoder`: it refuses such
/// a document too, and building its error for one that ends at that depth traps (Foundation's
/// `JSONError.SourceLocation`: `[` 513 times crashed the process; found by `scripts/fuzz realtime`).
public enum CloudJSON {
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        let value: JSONValue
        do {
            value = try JSONValue(parsing: bytes)
        } catch  where error.isDepthLimit {
            throw error
        } catch {
            return try JSONDecoder().decode(type, from: Data(bytes))
        }
        do {
            return try JSONValueDecoder.decode(type, from: value)
        } catch {
            return try JSONDecoder().decode(type, from: Data(bytes))
        }
    }

    public static func decode<T: Decodable>(_ type: T.Type, from text: String) throws -> T {
        try decode(type, from: Array(text.utf8))
    }
}
