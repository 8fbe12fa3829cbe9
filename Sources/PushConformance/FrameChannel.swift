#if canImport(Glibc)
import Glibc
#endif
import PushClient
import PushEventLoop
import PushWire

/// The byte pipe under one case connection: raw bytes out, whole frames in, every wait
/// bounded. Plain TCP uses `BlockingWireClient`, the client the cases were written
/// against; TLS uses `LoopWireChannel`, since OpenSSL is only reachable through
/// PushEventLoop.
protocol FrameChannel: AnyObject {
    func sendRaw(_ bytes: [UInt8]) throws(BlockingWireClient.Failure)
    func receiveFrame(timeoutMs: Int32?) throws(BlockingWireClient.Failure) -> Frame
    /// Ends our sending side so the peer reads EOF (over TLS: closes the connection).
    func shutdownWrite()
}

extension BlockingWireClient: FrameChannel {}

/// Why a connection could not be opened, in words, and whether nobody listens there.
struct ChannelOpenFailure: Error, CustomStringConvertible {
    var description: String
    var refused: Bool
}

/// TLS for the connections of a run: the CA that verifies the services and the name
/// their certificates must carry (nil: the host of each address).
public struct ConformanceTLS: Sendable {
    public var context: TLSContext
    public var serverName: String?

    public init(context: TLSContext, serverName: String? = nil) {
        self.context = context
        self.serverName = serverName
    }
}

enum FrameChannels {
    /// - Parameter receiveBufferBytes: a small kernel receive buffer (plain TCP only), for a
    ///   peer that stops reading and soon takes no more bytes.
    static func open(_ endpoint: HostPort, tls: ConformanceTLS?, timeoutMs: Int32, run: RunState,
                     receiveBufferBytes: Int32? = nil) throws(ChannelOpenFailure) -> FrameChannel {
        if let tls {
            return try LoopWireChannel.connect(endpoint, tls: tls, timeoutMs: timeoutMs, loop: try run.loop())
        }
        do {
            let client = try BlockingWireClient(host: endpoint.host, port: endpoint.port, timeoutMs: timeoutMs,
                                                receiveBufferBytes: receiveBufferBytes)
            client.defaultTimeoutMs = timeoutMs
            return client
        } catch {
            if case .connect(_, let code) = error {
                throw ChannelOpenFailure(description: String(cString: strerror(code)).lowercased(), refused: code == ECONNREFUSED)
            }
            throw ChannelOpenFailure(description: "\(error)", refused: false)
        }
    }
}
