import Glibc
import PushEventLoop
import PushTestSupport
import Testing

extension EventLoopSuite {
    @Test func oneShotTimerFiresOnceAfterItsDelay() throws {
        try withEventLoop { loop in
            let start = ContinuousClock.now
            var fired = 0
            var elapsed = Duration.zero
            let timer = loop.schedule(after: .milliseconds(30)) {
                fired += 1
                elapsed = ContinuousClock.now - start
            }
            #expect(timer.isPending)
            loop.schedule(after: .milliseconds(120)) { loop.stop() }
            runLoop(loop)
            #expect(fired == 1)
            // libevent reads a coarse (1 ms) monotonic clock, so allow a little early firing.
            #expect(elapsed >= .milliseconds(27))
            #expect(!timer.isPending)
        }
    }

    @Test func repeatingTimerFiresUntilCancelledFromItsOwnBody() throws {
        try withEventLoop { loop in
            var ticks = 0
            var timer: LoopTimer?
            timer = loop.schedule(after: .milliseconds(5), repeating: true) {
                ticks += 1
                if ticks == 5 { timer?.cancel() }
            }
            loop.schedule(after: .milliseconds(150)) { loop.stop() }
            runLoop(loop)
            #expect(ticks == 5)
            #expect(timer?.isPending == false)
        }
    }

    @Test func cancelledTimerNeverFiresAndRescheduleRearms() throws {
        try withEventLoop { loop in
            var cancelledFired = false
            let cancelled = loop.schedule(after: .milliseconds(10)) { cancelledFired = true }
            cancelled.cancel()
            cancelled.cancel()  // idempotent

            var rescheduledAt: Duration?
            let start = ContinuousClock.now
            let moved = loop.schedule(after: .milliseconds(5)) { rescheduledAt = ContinuousClock.now - start }
            moved.reschedule(after: .milliseconds(60))

            // A discarded one-shot still fires: the loop holds it while pending.
            var discardedFired = false
            loop.schedule(after: .milliseconds(1)) { discardedFired = true }

            loop.schedule(after: .milliseconds(150)) { loop.stop() }
            runLoop(loop)
            #expect(!cancelledFired)
            #expect(discardedFired)
            #expect((rescheduledAt ?? .zero) >= .milliseconds(57))
        }
    }

    @Test func signalHandlerRunsOnTheLoop() throws {
        try inIsolatedProcess {
            try withEventLoop { loop in
                var received = 0
                let handler = loop.onSignal(SIGUSR1) {
                    received += 1
                    loop.stop()
                }
                #expect(handler.isActive)
                // kill, not raise: test threads are pool threads that block signals; the process-wide
                // handler runs on whichever thread takes it and forwards to the loop.
                loop.schedule(after: .milliseconds(5)) { _ = kill(getpid(), SIGUSR1) }
                runLoop(loop, timeout: .seconds(5))
                #expect(received == 1)
                handler.cancel()
                #expect(!handler.isActive)
            }
        }
    }
}
