import Glibc
import PushEventLoop
import Synchronization
import Testing

/// Runs `body` on a new thread and waits for that thread to end.
private func onNewThread(_ body: @escaping @Sendable () -> Void) {
    TestThread(body).join()
}

extension EventLoopSuite {
    /// glibc gives a new thread the id (and usually the stack) of one that ended, so a
    /// loop's handle compared by pthread_t would claim a stranger as its loop thread.
    @Test func aLoopsThreadIsNotMistakenForALaterThreadWithTheSameID() {
        let handle = Mutex<LoopHandle?>(nil)
        let firstID = Mutex<pthread_t>(0)
        onNewThread {
            let loop = try? EventLoop()
            handle.withLock { $0 = loop?.handle }
            firstID.withLock { $0 = pthread_self() }
            #expect(loop?.isInLoopThread == true)
        }
        let loopHandle = handle.withLock { $0 }
        #expect(loopHandle != nil)
        let sameID = Mutex(false)
        let claimed = Mutex(true)
        onNewThread {
            sameID.withLock { $0 = pthread_equal(pthread_self(), firstID.withLock { $0 }) != 0 }
            claimed.withLock { $0 = loopHandle?.isInLoopThread ?? true }
        }
        #expect(!claimed.withLock { $0 }, "a later thread (same pthread id: \(sameID.withLock { $0 })) is not the loop's")
        #expect(loopHandle?.isInLoopThread == false)
    }
}
