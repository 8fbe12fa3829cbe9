/// The NATS subjects a gateway cluster uses, all under one prefix so that several clusters
/// can share a NATS server. Device ids become subject tokens through `token(_:)`.
///
/// - `PREFIX.nodes`: every node's heartbeat, to every node.
/// - `PREFIX.presence.B`: devices connecting and leaving, by bucket B of the device id
///   (`presenceBucket(of:)`), to the members of every node that can be the device's home
///   there (`presenceSubjects(for:)`); every node must know where a device is to route to it.
/// - `PREFIX.presence`: the same, unbucketed, as builds before the buckets publish it: read
///   always, written while such a node is heard.
/// - `PREFIX.node.NAME.push`: pushes for devices connected to node NAME, as requests; the
///   reply carries what that node wrote and queued. Only nodes holding a target get one.
/// - `PREFIX.node.NAME.reply`: the answers to the pushes NAME forwarded (a subject per
///   node rather than per request, so a request costs no subscription of its own).
/// - `PREFIX.node.NAME.take`: "a queue of a device you hold was written": NAME takes it.
/// - `PREFIX.queue.DEVICE`: a device's offline queue, one message (the whole queue) kept
///   per subject in the JetStream stream `streamName`.
public struct ClusterSubjects: Sendable, Equatable {
    public let prefix: String

    public init(prefix: String = "securepush") {
        self.prefix = prefix
    }

    var heartbeats: String { "\(prefix).nodes" }
    var presence: String { "\(prefix).presence" }
    func presence(bucket: Int) -> String { "\(prefix).presence.\(bucket)" }
    var presenceWildcard: String { "\(prefix).presence.*" }
    func pushes(for node: String) -> String { "\(prefix).node.\(node).push" }
    func takes(for node: String) -> String { "\(prefix).node.\(node).take" }
    func replies(for node: String) -> String { "\(prefix).node.\(node).reply" }
    func queue(of deviceID: String) -> String { "\(prefix).queue.\(ClusterSubjects.token(deviceID))" }
    var queueWildcard: String { "\(prefix).queue.>" }
    /// JetStream names allow no dots; the prefix's dots become underscores.
    var streamName: String {
        String(prefix.uppercased().map { $0 == "." ? "_" : $0 }) + "_QUEUES"
    }

    /// A subject token for any string: letters, digits, `-` and `_` as they are, every
    /// other byte as `%XX`, so distinct ids never share a token and none holds a `.`, a
    /// wildcard or white space.
    public static func token(_ text: String) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(text.utf8.count)
        let hex = Array("0123456789ABCDEF".utf8)
        for byte in text.utf8 {
            if isPlain(byte) {
                out.append(byte)
            } else {
                out.append(UInt8(ascii: "%"))
                out.append(hex[Int(byte >> 4)])
                out.append(hex[Int(byte & 0x0F)])
            }
        }
        return out.isEmpty ? "%" : String(decoding: out, as: UTF8.self)
    }

    /// Whether `name` can be a node name as it is: 1 to 64 letters, digits, `-` or `_`.
    public static func isValidNodeName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 64 && name.utf8.allSatisfy(isPlain)
    }

    private static func isPlain(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default:
            false
        }
    }
}
