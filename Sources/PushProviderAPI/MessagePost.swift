import FoundationEssentials
import PushWire

/// The body of `POST /v1/messages`: what a SEND carries (SPEC.md 4.17), as JSON.
///
/// ```json
/// {"recipient": "alice", "text": "Your code is 2213", "ttl_s": 3600, "read_limit": 1,
///  "push": {"device": "phone-1", "alert": true, "priority": 10, "collapse_key": "otp", "ttl_s": 600}}
/// ```
/// `payload` (standard base64) instead of `text` carries bytes; `sealed` (standard base64)
/// instead of either carries a payload the provider sealed to the recipient's devices
/// (SPEC.md 7.6, [4.19-1]); `"seal": "devices"` beside `text` or `payload` has the store
/// seal it on arrival ([4.19-6]). `push.tag` instead of `push.device` targets a tag of the
/// recipient; without either the push goes to all the recipient's devices. Unknown members are refused, so a misspelt option is an error
/// rather than silently ignored, and so is a member given twice (which JSONDecoder would
/// take one of silently).
public struct MessagePost: Decodable, Sendable {
    var recipient: String
    /// The text's UTF-8, which is the payload as it is.
    var text: [UInt8]?
    var payload: String?
    /// A sealed payload, base64.
    var sealed: String?
    /// "devices", or nil.
    var seal: String?
    var ttlSeconds: UInt32?
    var readLimit: UInt32?
    var push: PushOptions?

    /// The one value `seal` takes: the store seals to the devices of the payload's audience.
    static let sealToDevices = "devices"

    struct PushOptions: Decodable, Sendable {
        var device: String?
        var tag: String?
        var alert: Bool?
        var priority: UInt8?
        var collapseKey: String?
        var ttlSeconds: UInt32?

        init() {}

        enum Key: String, StrictKey {
            case device, tag, alert, priority
            case collapseKey = "collapse_key"
            case ttlSeconds = "ttl_s"
        }

        init(from decoder: Decoder) throws {
            let container = try StrictKeys.container(decoder, Key.self, in: "push.")
            device = try container.decodeIfPresent(String.self, .device)
            tag = try container.decodeIfPresent(String.self, .tag)
            alert = try container.decodeIfPresent(Bool.self, .alert)
            priority = try container.integer(UInt8.self, .priority, path: "push.")
            collapseKey = try container.decodeIfPresent(String.self, .collapseKey)
            ttlSeconds = try container.integer(UInt32.self, .ttlSeconds, path: "push.")
        }
    }

    init(recipient: String, text: [UInt8]?, payload: String?, sealed: String? = nil, seal: String? = nil, ttlSeconds: UInt32?,
         readLimit: UInt32?, push: PushOptions?) {
        self.recipient = recipient
        self.text = text
        self.payload = payload
        self.sealed = sealed
        self.seal = seal
        self.ttlSeconds = ttlSeconds
        self.readLimit = readLimit
        self.push = push
    }

    enum Key: String, StrictKey {
        case recipient, text, payload, sealed, seal, push
        case ttlSeconds = "ttl_s"
        case readLimit = "read_limit"
    }

    public init(from decoder: Decoder) throws {
        let container = try StrictKeys.container(decoder, Key.self, in: "")
        recipient = try container.decode(String.self, .recipient)
        text = try container.decodeIfPresent(String.self, .text).map { Array($0.utf8) }
        payload = try container.decodeIfPresent(String.self, .payload)
        sealed = try container.decodeIfPresent(String.self, .sealed)
        seal = try container.decodeIfPresent(String.self, .seal)
        ttlSeconds = try container.integer(UInt32.self, .ttlSeconds, path: "")
        readLimit = try container.integer(UInt32.self, .readLimit, path: "")
        push = try container.decodeIfPresent(PushOptions.self, .push)
    }

    private static let decoder = JSONDecoder()

    /// Decodes a request body: 400 when it is not JSON, 422 when it is but does not
    /// describe a message: not an object, a member missing, unknown, given twice, of the
    /// wrong type or out of range (a number no Double holds too, which JSONDecoder alone
    /// would call not JSON).
    ///
    /// One reader of JSON, FoundationEssentials' JSONDecoder: a hand-written reader of the
    /// usual body shape measured at a tenth of its instructions (118k against 10k a request
    /// under callgrind), but this project reads JSON with Codable only (see BENCHMARKS.md).
    public static func decode(_ body: [UInt8]) throws(ProviderAPIProblem) -> MessagePost {
        let scan = JSONMemberScan(body)
        let decoded = attempt(body)
        if case .failure(let problem) = decoded, decoded.notJSON {
            guard let number = scan.unrepresentable.first, !attempt(scan.withNumbersInRange(body)).notJSON else { throw problem }
            throw ProviderAPIProblem(422, Status.badRequest.name, "\(number.path) is out of range: no 64-bit float holds that number")
        }
        if let duplicate = scan.duplicate {
            throw ProviderAPIProblem(422, Status.badRequest.name, "member \(duplicate) is given more than once")
        }
        return try decoded.get()
    }

    private static func attempt(_ body: [UInt8]) -> Result<MessagePost, ProviderAPIProblem> {
        do {
            return .success(try MessagePost.decoder.decode(MessagePost.self, from: Data(body)))
        } catch let error as DecodingError {
            return .failure(ProviderAPIProblem.describing(error))
        } catch let error as StrictKeys.Unknown {
            return .failure(ProviderAPIProblem(422, Status.badRequest.name, "unknown member \(error.path)"))
        } catch let error as OutOfRange {
            return .failure(ProviderAPIProblem(422, Status.badRequest.name, error.detail))
        } catch {
            return .failure(ProviderAPIProblem(400, Status.badRequest.name, "the body is not JSON"))
        }
    }

    private static func base64(_ encoded: String, member: String) throws(ProviderAPIProblem) -> [UInt8] {
        guard let data = Data(base64Encoded: encoded) else {
            throw ProviderAPIProblem(422, Status.badRequest.name, "\(member) is not standard base64")
        }
        return Array(data)
    }

    /// The SEND it asks for, checked as a value by the protocol's own rules
    /// (`SendRequest.validate`), so that every limit of the wire (field lengths, ranges,
    /// UTF-8, control characters) applies exactly as it does to a SEND frame.
    public func sendRequest(idempotencyKey: String?) throws(ProviderAPIProblem) -> SendRequest {
        let bytes: [UInt8]
        var form = PayloadForm.plain
        switch (text, payload, sealed) {
        case (let text?, nil, nil): bytes = text
        case (nil, let encoded?, nil): bytes = try MessagePost.base64(encoded, member: "payload")
        case (nil, nil, let encoded?):
            bytes = try MessagePost.base64(encoded, member: "sealed")
            form = .sealed
        default:
            throw ProviderAPIProblem(422, Status.badRequest.name, "give exactly one of text, payload and sealed")
        }
        if let seal {
            guard seal == MessagePost.sealToDevices else {
                throw ProviderAPIProblem(422, Status.badRequest.name, #"seal must be "devices": the store seals the message to the recipient's device keys"#)
            }
            guard form == .plain else {
                throw ProviderAPIProblem(422, Status.badRequest.name, "seal goes with text or payload: a sealed payload is sealed already")
            }
            form = .sealOnArrival
        }
        let target: PushTarget?
        switch (push?.device, push?.tag) {
        case (nil, nil): target = nil
        case (let device?, nil): target = .device(device)
        case (nil, let tag?): target = .tag(tag)
        default: throw ProviderAPIProblem(422, Status.badRequest.name, "give at most one of push.device and push.tag")
        }
        let send = SendRequest(user: recipient, payload: bytes, form: form, ttlSeconds: ttlSeconds ?? StoreRequest.defaultTTLSeconds,
                               readLimit: readLimit ?? 0, target: target, alert: push?.alert ?? false,
                               priority: push?.priority ?? Push.defaultPriority, collapseKey: push?.collapseKey,
                               pushTTLSeconds: push?.ttlSeconds, idempotencyKey: idempotencyKey)
        do throws(WireError) {
            try send.validate()
        } catch {
            throw ProviderAPIProblem.refusing(error, in: self)
        }
        return send
    }
}

/// A number that is not an integer of its member's range. The toolchain's JSON decoder
/// reports one as data that is not JSON at all, so numbers are read as Double and checked here.
struct OutOfRange: Error {
    var detail: String
}

/// The members a type knows, by their JSON names.
protocol StrictKey: RawRepresentable<String>, CaseIterable, Equatable, Sendable {}

extension StrictKey {
    /// One bit per known member, in declaration order (a type knows far fewer than 64).
    var bit: UInt64 {
        var bit: UInt64 = 1
        for known in Self.allCases {
            if known == self { return bit }
            bit <<= 1
        }
        return 0
    }
}

/// A keyed container of an object with no unknown member, and which known members it
/// holds: an absent member is answered from that alone. The decoder's own lookup of a
/// member that is not there cost as much as a present one (over a thousand instructions
/// each, most of them for the members nearly every request leaves out).
struct StrictContainer<Known: StrictKey> {
    let keyed: KeyedDecodingContainer<StrictCodingKey<Known>>
    let present: UInt64

    func decode<T: Decodable>(_ type: T.Type, _ key: Known) throws -> T {
        try keyed.decode(type, forKey: .known(key))
    }

    /// nil for a member that is absent or null.
    func decodeIfPresent<T: Decodable>(_ type: T.Type, _ key: Known) throws -> T? {
        guard present & key.bit != 0 else { return nil }
        return try keyed.decodeIfPresent(type, forKey: .known(key))
    }

    func integer<T: FixedWidthInteger>(_ type: T.Type, _ key: Known, path: String) throws -> T? {
        guard let number = try decodeIfPresent(Double.self, key) else { return nil }
        guard number == number.rounded(), number >= Double(T.min), number <= Double(T.max), let value = T(exactly: number) else {
            throw OutOfRange(detail: "\(path)\(key.rawValue) must be an integer from \(T.min) to \(T.max)")
        }
        return value
    }
}

/// A coding key that takes any member's name, so that one keyed container both reads the
/// known members and names the first unknown one.
enum StrictCodingKey<Known: StrictKey>: CodingKey {
    case known(Known)
    case unknown(String)

    init(stringValue: String) {
        self = Known(rawValue: stringValue).map { .known($0) } ?? .unknown(stringValue)
    }

    init?(intValue: Int) { nil }
    var intValue: Int? { nil }

    var stringValue: String {
        switch self {
        case .known(let key): key.rawValue
        case .unknown(let name): name
        }
    }
}

/// Refuses members a type does not know.
enum StrictKeys {
    struct Unknown: Error {
        var path: String
    }

    static func container<Known: StrictKey>(_ decoder: Decoder, _ known: Known.Type, in parent: String) throws -> StrictContainer<Known> {
        let container = try decoder.container(keyedBy: StrictCodingKey<Known>.self)
        var present: UInt64 = 0
        for key in container.allKeys {
            switch key {
            case .known(let member): present |= member.bit
            case .unknown(let name): throw Unknown(path: parent + name)
            }
        }
        return StrictContainer(keyed: container, present: present)
    }
}

extension Result where Failure == ProviderAPIProblem {
    /// The text was not JSON at all (rather than JSON of the wrong shape).
    fileprivate var notJSON: Bool {
        if case .failure(let problem) = self { problem.httpStatus == 400 } else { false }
    }
}

extension ProviderAPIProblem {
    /// A JSON document that does not fit the message's shape.
    static func describing(_ error: DecodingError) -> ProviderAPIProblem {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case .dataCorrupted(let context) where context.codingPath.isEmpty:
            return ProviderAPIProblem(400, Status.badRequest.name, "the body is not JSON")
        case .keyNotFound(let key, let context):
            let parent = path(context)
            return ProviderAPIProblem(422, Status.badRequest.name, "missing member \(parent.isEmpty ? "" : parent + ".")\(key.stringValue)")
        case .typeMismatch(_, let context), .valueNotFound(_, let context):
            let at = path(context)
            return ProviderAPIProblem(422, Status.badRequest.name, at.isEmpty ? "the body is not a JSON object" : "\(at) has the wrong type")
        case .dataCorrupted(let context):
            return ProviderAPIProblem(422, Status.badRequest.name, "\(path(context)) is out of range")
        @unknown default:
            return ProviderAPIProblem(422, Status.badRequest.name, "the body does not describe a message")
        }
    }

}
