import Glibc
import PushEventLoop
import PushTestSupport
import Testing

/// The loop's watch on a descriptor someone else owns (libpq's socket): callbacks follow
/// readiness and interest, and the descriptor is never closed by the watch.
@Suite(.ownThread) struct FileDescriptorWatchTests {
    private func socketPair() throws -> (Int32, Int32) {
        var fds: [Int32] = [-1, -1]
        let result = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0, &fds)
        try #require(result == 0)
        return (fds[0], fds[1])
    }

    @Test("readable fires while data waits, writable only while wanted, nothing after cancel; the fd stays open")
    func followsReadinessAndInterest() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (mine, peer) = try socketPair()
        defer { close(mine); close(peer) }
        var reads = 0
        var writes = 0
        let watch = try loop.watch(fd: mine, onReadable: {
            reads += 1
            var byte: UInt8 = 0
            _ = read(mine, &byte, 1)
        }, onWritable: { writes += 1 })
        #expect(watch.isActive && watch.wantsRead && !watch.wantsWrite)

        var one: UInt8 = 7
        _ = write(peer, &one, 1)
        #expect(loop.run(until: { reads == 1 }, timeoutSeconds: 5))
        #expect(writes == 0)

        watch.wantsWrite = true
        #expect(loop.run(until: { writes >= 3 }, timeoutSeconds: 5))
        watch.wantsWrite = false
        let writesThen = writes
        loop.runOnce()
        loop.runOnce()
        #expect(writes == writesThen)

        watch.cancel()
        #expect(!watch.isActive)
        _ = write(peer, &one, 1)
        loop.runOnce()
        loop.runOnce()
        #expect(reads == 1)
        // Still open: the watch does not own it.
        #expect(fcntl(mine, F_GETFD) >= 0)
    }

    @Test("a watch on a new descriptor that got the number of a closed one sees the new one")
    func reusedNumberIsWatchedAfresh() throws {
        let loop = try EventLoop()
        defer { loop.shutdown() }
        let (mine, firstPeer) = try socketPair()
        var peer = firstPeer
        var reads = 0
        var watch = try loop.watch(fd: mine, onReadable: { reads += 1 }, onWritable: {})
        loop.runOnce()
        // What libpq may do between two connect attempts, inside one callback: close its
        // socket and open another that gets the same number (dup2 makes that certain
        // without racing other tests for the number).
        var replaced = false
        loop.schedule(after: .zero) {
            watch.cancel()
            close(peer)
            guard let (fresh, freshPeer) = try? socketPair() else { return }
            dup2(fresh, mine)
            close(fresh)
            peer = freshPeer
            watch = (try? loop.watch(fd: mine, onReadable: {
                reads += 1
                var byte: UInt8 = 0
                _ = read(mine, &byte, 1)
            }, onWritable: {})) ?? watch
            replaced = true
        }
        #expect(loop.run(until: { replaced }, timeoutSeconds: 5))
        var one: UInt8 = 1
        _ = write(peer, &one, 1)
        #expect(loop.run(until: { reads == 1 }, timeoutSeconds: 5))
        watch.cancel()
        close(mine)
        close(peer)
    }

    @Test("loop shutdown cancels an active watch and tells its owner")
    func shutdownNotifiesOwner() throws {
        let loop = try EventLoop()
        let (mine, peer) = try socketPair()
        defer { close(mine); close(peer) }
        let watch = try loop.watch(fd: mine, onReadable: {}, onWritable: {})
        var told = false
        watch.onLoopShutdown = { told = true }
        loop.shutdown()
        #expect(told)
        #expect(!watch.isActive)
        #expect(fcntl(mine, F_GETFD) >= 0)
    }
}
