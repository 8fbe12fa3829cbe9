import CLibevent
import Glibc

/// How a `Connection`'s bytes reach its socket: one implementation per kind of stream
/// (plain TCP, TLS), the way Redis keeps one connection type per transport. The
/// connection keeps what is common (handler, decoder, output cap, closing); a transport
/// owns the socket and its libevent objects, and reports back to its `owner`.
/// Loop-confined.
///
/// What a transport tells its owner: `readable()` (input may be waiting: call `read`),
/// `outputWritten()` (while `owner.isWatchingOutput`), `transportConnected()`,
/// `connectFailed(_:)`, `inputEnded()`, `transportFailed(_:)`, `flushTimedOut()`.
/// A call into the owner may close the connection, which closes the transport: a
/// transport touches none of its own state after such a call.
protocol Transport: AnyObject {
    /// Set once by the connection that owns this transport (implementations keep it
    /// `unowned(unsafe)`: the owner outlives it).
    var owner: Connection? { get set }
    /// The socket; -1 once closed.
    var fd: Int32 { get }
    var isTLS: Bool { get }
    /// True when the transport reads ahead into a buffer of its own, so `read` is worth
    /// calling again after a full scratch buffer (a plain socket is read once per wakeup:
    /// level-triggered epoll brings it back for the rest).
    var readsAhead: Bool { get }
    /// Bytes queued for the peer and not yet handed to the kernel (or to OpenSSL).
    var outputBufferedBytes: Int { get }
    /// Bytes received and held by the transport, not yet taken by `read`.
    var inputBufferedBytes: Int { get }

    /// Starts a non-blocking connect; 0, or the errno of an immediate failure.
    func connect(to address: SocketAddress) -> Int32
    /// The owner has installed its handler: output may flow.
    func startIO()
    /// Arms or disarms read readiness reports.
    func setReading(_ enabled: Bool)
    /// A `readable()` report on a later pass of the loop, even with nothing new arrived.
    func triggerRead()
    func read(into buffer: UnsafeMutableRawBufferPointer) -> ReadResult
    /// Queues bytes; returns the bytes now queued, or -1 if memory ran out.
    func write(_ bytes: UnsafeRawBufferPointer) -> Int
    /// While the owner waits for queued output to fall to `lowWater`: make sure
    /// `outputWritten()` reports progress, and report `flushTimedOut()` if the peer takes
    /// nothing for `timeout`. Nil stops watching.
    func watchOutput(lowWater: Int?, timeout: Duration?)
    /// Frees everything and closes the socket; `clean` lets TLS say close_notify first.
    func close(clean: Bool)
    /// For a move to another loop (see ConnectionHandoff): frees the libevent objects but
    /// not the socket or the TLS session, and gives those up with the input received and
    /// not yet read; the transport is then closed. Nil, changing nothing, when that is not
    /// possible now (connecting, a TLS handshake not done, output queued). Never from
    /// inside one of the transport's own libevent callbacks: those may go on using it.
    func detach() -> DetachedSocket?
}

/// What a transport gives up in `detach()`.
struct DetachedSocket {
    let fd: Int32
    /// The TLS session, for TLS.
    let ssl: OpaquePointer?
    /// Received and not yet taken by `read`, in order.
    let input: [UInt8]
}

enum ReadResult {
    case bytes(Int)
    /// Nothing more for now.
    case wouldBlock
    /// The peer shut down its sending side.
    case end
    case failed(errno: Int32)
}

/// Latency over throughput for a request/response protocol: small frames go out now.
func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}
