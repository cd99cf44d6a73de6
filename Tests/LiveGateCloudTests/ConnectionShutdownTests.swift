// Licensed under the Apache License, Version 2.0.

import LiveGateCloud
import Synchronization
import Testing

/// A connection's shutdown calls each handler registered while its operation runs once, in order; one
/// registered after the shutdown at once; none whose operation has ended; and without a connection shutdown
/// the operation runs alone.
@Suite struct ConnectionShutdownTests {
    private final class Calls: Sendable {
        let names = Mutex<[String]>([])
        func record(_ name: String) { names.withLock { $0.append(name) } }
        var recorded: [String] { names.withLock { $0 } }
    }

    @Test func handlersAreCalledOnceInOrderWhileTheirOperationRuns() async {
        let shutdown = ConnectionShutdown()
        let calls = Calls()
        await ConnectionShutdown.$current.withValue(shutdown) {
            await ConnectionShutdown.withHandler {
            } onShutdown: {
                calls.record("ended before")
            }
            await ConnectionShutdown.withHandler {
                await ConnectionShutdown.withHandler {
                    shutdown.trigger()
                    shutdown.trigger()
                    #expect(calls.recorded == ["outer", "inner"])
                } onShutdown: {
                    calls.record("inner")
                }
            } onShutdown: {
                calls.record("outer")
            }
            await ConnectionShutdown.withHandler {
                #expect(calls.recorded == ["outer", "inner", "after"])
            } onShutdown: {
                calls.record("after")
            }
        }
        #expect(calls.recorded == ["outer", "inner", "after"])
    }

    @Test func withoutAConnectionShutdownTheOperationRunsAlone() async {
        let calls = Calls()
        let answer = await ConnectionShutdown.withHandler {
            calls.record("operation")
            return 42
        } onShutdown: {
            calls.record("handler")
        }
        #expect(answer == 42 && calls.recorded == ["operation"])
    }
}
