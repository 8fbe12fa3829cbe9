/// Who is on the other end of a connection (SPEC.md section 5).
public enum PeerRole: UInt8, Sendable, CustomStringConvertible {
    case device = 1
    case provider = 2
    /// A gateway reading the store's device registry (REGISTRY, SPEC.md 4.16).
    case gateway = 3

    public var description: String {
        switch self {
        case .device: "device"
        case .provider: "provider"
        case .gateway: "gateway"
        }
    }
}

/// HELLO: the first frame of every connection.
public struct Hello: WireMessage {
    public static let type = MessageType.hello
    public static let fieldTable: FieldTable = [.role, .versionMin, .versionMax, .credential, .maxFrame, .keepaliveMs, .maxInflight, .name]

    public var role: PeerRole
    public var versionMin: UInt8
    public var versionMax: UInt8
    public var credential: [UInt8]?
    public var maxFrame: UInt32?
    public var keepaliveMs: UInt32?
    public var maxInflight: UInt32?
    public var name: String?

    public init(role: PeerRole, versionMin: UInt8 = 1, versionMax: UInt8 = 1, credential: [UInt8]? = nil,
                maxFrame: UInt32? = nil, keepaliveMs: UInt32? = nil, maxInflight: UInt32? = nil, name: String? = nil) {
        self.role = role
        self.versionMin = versionMin
        self.versionMax = versionMax
        self.credential = credential
        self.maxFrame = maxFrame
        self.keepaliveMs = keepaliveMs
        self.maxInflight = maxInflight
        self.name = name
    }

    public init(fields: FieldSet) throws(WireError) {
        let rawRole = try fields.requiredUInt8(.role, in: 1...3)
        role = PeerRole(rawValue: rawRole) ?? .device
        versionMin = try fields.required(.versionMin, FieldSet.uint8)
        versionMax = try fields.required(.versionMax, FieldSet.uint8)
        credential = fields.bytes(.credential)
        maxFrame = fields.uint32(.maxFrame)
        keepaliveMs = fields.uint32(.keepaliveMs)
        maxInflight = fields.uint32(.maxInflight)
        name = fields.string(.name)
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.role, role.rawValue)
        writer.append(.versionMin, versionMin)
        writer.append(.versionMax, versionMax)
        if let credential { writer.append(.credential, credential) }
        if let maxFrame { writer.append(.maxFrame, maxFrame) }
        if let keepaliveMs { writer.append(.keepaliveMs, keepaliveMs) }
        if let maxInflight { writer.append(.maxInflight, maxInflight) }
        if let name { writer.append(.name, name) }
    }
}

/// HELLO_OK: the limits in force for the rest of the connection.
public struct HelloOK: WireMessage {
    public static let type = MessageType.helloOK
    public static let fieldTable: FieldTable = [.maxFrame, .keepaliveMs, .maxInflight, .version, .name]

    public var version: UInt8
    public var maxFrame: UInt32
    public var keepaliveMs: UInt32
    public var maxInflight: UInt32
    public var name: String?

    public init(version: UInt8 = 1, maxFrame: UInt32, keepaliveMs: UInt32, maxInflight: UInt32, name: String? = nil) {
        self.version = version
        self.maxFrame = maxFrame
        self.keepaliveMs = keepaliveMs
        self.maxInflight = maxInflight
        self.name = name
    }

    public init(fields: FieldSet) throws(WireError) {
        version = try fields.required(.version, FieldSet.uint8)
        maxFrame = try fields.required(.maxFrame, FieldSet.uint32)
        keepaliveMs = try fields.required(.keepaliveMs, FieldSet.uint32)
        maxInflight = try fields.required(.maxInflight, FieldSet.uint32)
        name = fields.string(.name)
    }

    public func writeFields(to writer: inout FieldWriter) {
        writer.append(.maxFrame, maxFrame)
        writer.append(.keepaliveMs, keepaliveMs)
        writer.append(.maxInflight, maxInflight)
        writer.append(.version, version)
        if let name { writer.append(.name, name) }
    }
}

public struct Ping: EmptyWireMessage {
    public static let type = MessageType.ping
    public init() {}
}

public struct Pong: EmptyWireMessage {
    public static let type = MessageType.pong
    public init() {}
}

/// GOAWAY: the sender will close; requests after `lastCorrelation` were not processed.
/// The reason travels in the header's status.
public struct Goaway: WireMessage {
    public static let type = MessageType.goaway
    public static let fieldTable: FieldTable = [.message, .lastCorrelation]

    public var status: Status
    public var lastCorrelation: UInt32
    public var message: String?

    public init(status: Status, lastCorrelation: UInt32, message: String? = nil) {
        self.status = status
        self.lastCorrelation = lastCorrelation
        self.message = message
    }

    /// The status comes from the header; `Message.decode` fills it in.
    public init(fields: FieldSet) throws(WireError) {
        status = .ok
        lastCorrelation = try fields.required(.lastCorrelation, FieldSet.uint32)
        message = fields.string(.message)
    }

    public func writeFields(to writer: inout FieldWriter) {
        if let message { writer.append(.message, message.truncatedUTF8(maxBytes: 1024)) }
        writer.append(.lastCorrelation, lastCorrelation)
    }
}

/// ERROR: the reply to any request that failed; the status travels in the header.
public struct ErrorReply: WireMessage {
    public static let type = MessageType.error
    public static let fieldTable: FieldTable = [.message]

    public var status: Status
    public var message: String?

    public init(status: Status, message: String? = nil) {
        self.status = status
        self.message = message
    }

    public init(fields: FieldSet) throws(WireError) {
        status = .ok
        message = fields.string(.message)
    }

    public func writeFields(to writer: inout FieldWriter) {
        if let message { writer.append(.message, message.truncatedUTF8(maxBytes: 1024)) }
    }
}

extension String {
    /// The longest prefix of whole characters that fits in `maxBytes` of UTF-8.
    func truncatedUTF8(maxBytes: Int) -> String {
        guard utf8.count > maxBytes else { return self }
        var end = startIndex
        var used = 0
        for index in indices {
            let next = self.index(after: index)
            let width = self.utf8.distance(from: index, to: next)
            guard used + width <= maxBytes else { break }
            used += width
            end = next
        }
        return String(self[..<end])
    }
}
