// Licensed under the Apache License, Version 2.0.

import Foundation
import LiveGateFuzzTargets

/// The target `LIVEGATE_FUZZ_TARGET` names (frame, request, realtime, config), read once.
let selectedTarget: FuzzTarget = {
    let name = ProcessInfo.processInfo.environment["LIVEGATE_FUZZ_TARGET"] ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        FileHandle.standardError.write(
            Data("livegate-fuzz: set LIVEGATE_FUZZ_TARGET to one of \(FuzzTarget.allCases.map(\.rawValue).joined(separator: ", "))\n".utf8)
        )
        exit(2)
    }
    return target
}()

/// libFuzzer's entry: one input. A violated property aborts, which libFuzzer reports as a crash with the input.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ start: UnsafeRawPointer, _ count: Int) -> CInt {
    let bytes = Array(UnsafeRawBufferPointer(start: start, count: count))
    do {
        try selectedTarget.run(bytes)
    } catch {
        fatalError("\(selectedTarget.rawValue): \(error)")
    }
    return 0
}

#if LIVEGATE_FUZZ
    /// libFuzzer's driver (in the runtime `-sanitize=fuzzer` links).
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafeRawPointer, Int) -> CInt
    ) -> CInt

    /// The program's entry: SwiftPM links an executable target with `main` defined as `<module>_main`, so
    /// libFuzzer's own `main` is not used; this one runs libFuzzer's driver with the command line.
    @_cdecl("livegate_fuzz_main")
    func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
        var count = argc
        var arguments = argv
        return LLVMFuzzerRunDriver(&count, &arguments) { start, size in fuzzOneInput(start, size) }
    }
#else
    /// Built without libFuzzer: runs the selected target on each file (or each file of each directory) named
    /// on the command line, and exits 1 at the first violation.
    @main struct ReplayInputs {
        static func main() {
            var failures = 0
            for argument in CommandLine.arguments.dropFirst() {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: argument, isDirectory: &isDirectory) else { continue }
                let files =
                    isDirectory.boolValue
                    ? ((try? FileManager.default.contentsOfDirectory(atPath: argument)) ?? []).sorted().map { argument + "/" + $0 } : [argument]
                for file in files {
                    guard let data = FileManager.default.contents(atPath: file) else { continue }
                    do {
                        try selectedTarget.run(Array(data))
                    } catch {
                        print("\(file): \(error)")
                        failures += 1
                    }
                }
            }
            exit(failures == 0 ? 0 : 1)
        }
    }
#endif
