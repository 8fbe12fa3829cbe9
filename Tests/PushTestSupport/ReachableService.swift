import PushClient

/// A store or gateway a test can open connections to, in this process or another.
public protocol ReachableService {
    var host: String { get }
    var port: Int { get }
}

extension ReachableService {
    public func connect(timeoutMs: Int32 = 5_000, receiveBufferBytes: Int32? = nil, sendBufferBytes: Int32? = nil) throws -> BlockingWireClient {
        try BlockingWireClient(host: host, port: port, timeoutMs: timeoutMs, receiveBufferBytes: receiveBufferBytes,
                               sendBufferBytes: sendBufferBytes)
    }
}
