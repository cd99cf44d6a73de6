// Licensed under the Apache License, Version 2.0.

import LiveJSON
import Testing

/// A key written in the program (`JSONWriter.writeKey(literal:first:)`, copied as it is) comes out as the same
/// bytes as the scanned `writeKey(_:first:)` writes, first in its object or after another, with slashes escaped
/// or not.
@Suite struct JSONWriterLiteralKeyTests {
    @Test(arguments: [false, true]) func literalKeysAreWrittenAsScannedKeysAre(escapesSlashes: Bool) {
        let keys: [(StaticString, String)] = [
            ("dataStatus", "dataStatus"), ("id", "id"), ("x", "x"), ("updatedAt", "updatedAt"), ("a b-c_d.e", "a b-c_d.e"),
            ("", ""),
        ]
        for (literal, string) in keys {
            for first in [true, false] {
                var literalWriter = JSONWriter(escapesSlashes: escapesSlashes)
                literalWriter.beginObject()
                literalWriter.writeKey(literal: literal, first: first)
                literalWriter.write(Int64(1))
                var scannedWriter = JSONWriter(escapesSlashes: escapesSlashes)
                scannedWriter.beginObject()
                scannedWriter.writeKey(string, first: first)
                scannedWriter.write(Int64(1))
                #expect(literalWriter.bytes == scannedWriter.bytes, "\(string), first: \(first)")
            }
        }
    }
}
