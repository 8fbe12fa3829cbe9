import PushWire

/// How long a connection may take over the steps that have a deadline. The defaults
/// are generous; a server facing the open internet will want them tighter.
public struct SessionTimeouts: Sendable, Equatable {
    /// From the connection's start to HELLO_OK: a server closes a peer that has not
    /// completed HELLO by then, however it trickles bytes; a client gives up waiting for
    /// HELLO_OK. The default is the 45 s that [5.4-3] allows a silent client.
    public var handshakeMs: Int64 = 45_000
    /// From the first byte of a frame to its last: a frame that has started must finish.
    public var frameMs: Int64 = 30_000

    public init(handshakeMs: Int64 = 45_000, frameMs: Int64 = 30_000) {
        self.handshakeMs = handshakeMs
        self.frameMs = frameMs
    }
}

/// A server's side of the limits negotiated in HELLO (SPEC.md section 5.2), and the
/// requests it carries out ([4.1-4]).
public struct ServiceLimits: Sendable {
    public var maxFrame = FrameLimits.defaultMaxFrame
    public var keepaliveMs: UInt32 = 30_000
    public var maxInflight: UInt32 = 4096
    public var maxConnections = 10_000
    public var timeouts = SessionTimeouts()
    /// The requests this service serves; any other request is BAD_REQUEST once the role
    /// check has passed.
    public var served: Set<MessageType>
    public var name: String

    public init(name: String, served: Set<MessageType>) {
        self.name = name
        self.served = served
    }

    /// The keepalive a server applies before HELLO_OK ([5.4-3]).
    public static let handshakeKeepaliveMs: Int64 = 30_000
}
