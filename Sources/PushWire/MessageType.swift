/// Message types of protocol v1 (SPEC.md section 4). Requests and their replies are
/// distinct types; PUSH and FETCH in particular never share a type or a reply.
public enum MessageType: UInt8, CaseIterable, Sendable, CustomStringConvertible {
    case hello = 0x01
    case helloOK = 0x02
    case ping = 0x03
    case pong = 0x04
    case goaway = 0x05
    case error = 0x06

    case login = 0x10
    case loginOK = 0x11
    case store = 0x12
    case storeOK = 0x13
    case fetch = 0x14
    case fetchOK = 0x15
    case sync = 0x16
    case syncOK = 0x17
    case ack = 0x18
    case ackOK = 0x19
    case recall = 0x1A
    case recallOK = 0x1B
    case status = 0x1C
    case statusOK = 0x1D
    case keys = 0x1E
    case keysOK = 0x1F

    case push = 0x20
    case pushAck = 0x21
    case deliveryAck = 0x22
    case missed = 0x23
    case registry = 0x24
    case registryOK = 0x25
    case send = 0x26
    case sendOK = 0x27

    /// The name the spec and the vector files use.
    public var specName: String {
        switch self {
        case .hello: "HELLO"
        case .helloOK: "HELLO_OK"
        case .ping: "PING"
        case .pong: "PONG"
        case .goaway: "GOAWAY"
        case .error: "ERROR"
        case .login: "LOGIN"
        case .loginOK: "LOGIN_OK"
        case .store: "STORE"
        case .storeOK: "STORE_OK"
        case .fetch: "FETCH"
        case .fetchOK: "FETCH_OK"
        case .sync: "SYNC"
        case .syncOK: "SYNC_OK"
        case .ack: "ACK"
        case .ackOK: "ACK_OK"
        case .recall: "RECALL"
        case .recallOK: "RECALL_OK"
        case .status: "STATUS"
        case .statusOK: "STATUS_OK"
        case .keys: "KEYS"
        case .keysOK: "KEYS_OK"
        case .push: "PUSH"
        case .pushAck: "PUSH_ACK"
        case .deliveryAck: "DELIVERY_ACK"
        case .missed: "MISSED"
        case .registry: "REGISTRY"
        case .registryOK: "REGISTRY_OK"
        case .send: "SEND"
        case .sendOK: "SEND_OK"
        }
    }

    public var description: String { specName }

    /// Requests are answered (by their reply or ERROR); replies and one-way messages
    /// never are, not even when malformed ([4.1-1], [5.6-3]).
    public var isRequest: Bool {
        switch self {
        case .hello, .ping, .login, .store, .send, .fetch, .sync, .ack, .recall, .status, .keys, .push, .registry: true
        default: false
        }
    }

    public init?(specName: String) {
        guard let found = MessageType.allCases.first(where: { $0.specName == specName }) else { return nil }
        self = found
    }
}
