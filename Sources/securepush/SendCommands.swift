import ArgumentParser
import PushClient
import PushEventLoop
import PushSecurity
import PushWire
#if canImport(Glibc)
import Glibc
#endif

/// Options every provider command shares.
struct ProviderOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The store's address: a host name or an IP address, and the port (IPv6 in brackets: [::1]:7070). \(addressListHelp)",
                               valueName: "host:port"), transform: parseStoreAddresses)
    var store: AddressList
    @Option(help: ArgumentHelp("The provider key file (DIR/provider.key from `securepush init`).", valueName: "file"))
    var providerKey: String
    @Option(help: ArgumentHelp("CA certificate (PEM) to verify TLS servers with; without it the connection is plain TCP.",
                               valueName: "file"))
    var caFile: String?
    @Option(help: ArgumentHelp("How long to wait for the servers, in seconds (fractions allowed).", valueName: "seconds"))
    var timeout = Seconds(10)

    /// A provider client with the HELLO deadline inside the command's own; `gateway` only
    /// for STORE then PUSH.
    func client(loop: EventLoop, store: ServerLink.Endpoint, gateway: ServerLink.Endpoint? = nil, key: SecretKey) -> ProviderClient {
        let client = ProviderClient(loop: loop, store: store, gateway: gateway, providerKey: key)
        client.timeouts.handshakeMs = helloTimeoutMs(commandTimeoutSeconds: timeout.value)
        return client
    }

    func describe(_ error: ClientError, talkingTo service: String, at address: HostPort) -> CommandFailure {
        securepush.describe(error, talkingTo: service, at: address, tls: caFile != nil)
    }

    /// Ends the command when a connection fails for good, or when every address of a
    /// service failed in a row (`only`: the one service whose failures matter); a store
    /// that fails while another of the list answers is passed over.
    /// One request to the store as this provider (STATUS, RECALL, KEYS): `request` starts it on
    /// a client, and its answer ends the run; a failure becomes `explain`'s message, or
    /// `describe`'s when that gives none.
    func askStore<T>(_ request: @escaping (ProviderClient, @escaping (Result<T, ClientError>) -> Void) -> Void,
                     explain: @escaping (ClientError, ProviderClient) -> CommandFailure? = { _, _ in nil }) throws -> T {
        let key = try key()
        let storeEndpoint = try endpoint(store, caFile: caFile)
        return try runUntilDone(timeoutSeconds: timeout.value, what: "the store") { loop, done in
            let client = self.client(loop: loop, store: storeEndpoint, key: key)
            failOnConnectionErrors(client, only: "store", done)
            request(client) { result in
                client.stop()
                done(result.mapError { explain($0, client) ?? describe($0, talkingTo: "store", at: client.storeAddress) })
            }
        }
    }

    func failOnConnectionErrors<T>(_ client: ProviderClient, only: String? = nil, _ done: @escaping (Result<T, CommandFailure>) -> Void) {
        client.onConnectionError = { [weak client] service, error in
            guard let client, error.isPermanent, only == nil || only == service else { return }
            let address = service == "gateway" ? client.gatewayAddress ?? client.storeAddress : client.storeAddress
            done(.failure(describe(error, talkingTo: service, at: address)))
        }
        client.onUnreachable = { service, failures in
            guard only == nil || only == service else { return }
            done(.failure(securepush.describe(failures, talkingTo: service, tls: caFile != nil)))
        }
    }

    func key() throws -> SecretKey {
        do {
            return try Deployment.readKey(providerKey)
        } catch {
            throw CommandFailure("\(error)")
        }
    }
}

extension PushTarget: ExpressibleByArgument {
    public init?(argument: String) { self.init(parsing: argument) }
}

extension PayloadID: ExpressibleByArgument {
    public init?(argument: String) { self.init(hex: argument.lowercased()) }
}

struct SendCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Store a payload and push only its ID: prints the ID, and with --gateway the delivery summary.",
        discussion: """
            Without --gateway, one SEND to the store: it commits the payload and the push of its ID together and hands \
            the push to the gateway it was started with (`securepush store --gateway`), retrying until a gateway takes it; \
            `securepush status ID` then tells what became of the push. With --gateway, STORE to the store and then PUSH to \
            that gateway, two requests the command makes itself.
            """)

    @OptionGroup var provider: ProviderOptions
    @Option(help: ArgumentHelp("""
        Push through this gateway yourself (STORE, then PUSH): a host name or an IP address, and the port (IPv6 in \
        brackets: [::1]:7071). \(gatewayListHelp) Without it the store pushes (SEND).
        """, valueName: "host:port"), transform: parseGatewayAddresses)
    var gateway: AddressList?
    @Option(help: ArgumentHelp("""
        Makes the command safe to run again: a SEND with a key used in the last 24 hours stores nothing and prints the \
        first one's ID (at most 128 bytes; not with --gateway).
        """, valueName: "key"))
    var idempotencyKey: String?
    @Option(help: ArgumentHelp("Who gets the push: user:NAME, device:ID or tag:T (a name without control characters, compared as exact bytes).",
                               valueName: "target"), transform: parseTarget)
    var to: PushTarget
    @Option(help: "The payload's recipient when --to is a device or a tag (a payload belongs to one user).") var user: String?
    @Option(help: "The payload text.") var text: String?
    @Option(help: ArgumentHelp("A file whose bytes are the payload.", valueName: "file")) var file: String?
    @Option(help: ArgumentHelp("How long the payload can be read, in seconds, or with a unit: 90s, 15m, 2h, 7d.",
                               valueName: "duration"))
    var ttl: TimeToLive = TimeToLive(seconds: StoreRequest.defaultTTLSeconds)
    @Option(help: ArgumentHelp("A newer queued push with the same key replaces an older one (1 to 64 bytes).", valueName: "key"))
    var collapse: String?
    @Flag(help: "Erase the payload once the first device has acknowledged reading it.") var readOnce = false
    @Flag(help: "Seal the payload here to the recipient's device keys (read from the store with KEYS), so that the store keeps only what those devices can open; a device without a key then shows the generic notification.")
    var seal = false
    @Flag(help: "Have the store seal the payload to the recipient's device keys before it commits it: the store sees the text once, in memory, and never writes it.")
    var sealOnArrival = false

    func validate() throws {
        guard (text == nil) != (file == nil) else { throw ValidationError("give exactly one of --text and --file") }
        guard !(seal && sealOnArrival) else { throw ValidationError("give at most one of --seal and --seal-on-arrival") }
        if case .user = to {} else if user == nil { throw ValidationError("--user is required when --to is a device or a tag") }
        if let user { try checkIdentifier(user, as: .user, "--user") }
        if let collapse { try checkIdentifier(collapse, as: .collapseKey, "--collapse") }
        if let idempotencyKey {
            guard gateway == nil else { throw ValidationError("--idempotency-key needs the store to push (SEND): leave out --gateway") }
            try checkIdentifier(idempotencyKey, as: .idempotencyKey, "--idempotency-key")
        }
    }

    func run() throws {
        let key = try provider.key()
        let payload: [UInt8]
        if let text {
            payload = Array(text.utf8)
        } else {
            payload = try readPayloadFile(file ?? "")
        }
        let recipient: String
        if case .user(let name) = to { recipient = user ?? name } else { recipient = user ?? "" }
        var message = ProviderClient.SecureMessage(recipient: recipient, payload: payload, target: to)
        message.ttlSeconds = ttl.seconds
        message.collapseKey = collapse
        message.readOnce = readOnce
        if sealOnArrival { message.form = .sealOnArrival }
        let storeEndpoint = try endpoint(provider.store, caFile: provider.caFile)
        guard let gateway else { return try sendThroughStore(message, to: storeEndpoint, key: key) }
        let gatewayEndpoint = try endpoint(gateway, caFile: provider.caFile)
        let receipt: SendReceipt = try runUntilDone(timeoutSeconds: provider.timeout.value, what: "the store and the gateway") { loop, done in
            let client = provider.client(loop: loop, store: storeEndpoint, gateway: gatewayEndpoint, key: key)
            provider.failOnConnectionErrors(client, done)
            sealedIfAsked(message, client: client, done) { message in
                client.send(message) { result in
                    client.stop()
                    done(result.mapError { explain($0, message, client: client) })
                }
            }
        }
        announce("id \(receipt.id.hex)")
        announce("delivery: written to \(receipt.delivery.written) device(s), queued for \(receipt.delivery.queued)")
        announce("readable until \(localTime(milliseconds: receipt.expiresAt))")
    }

    /// One SEND: the store commits payload and push together and pushes itself.
    private func sendThroughStore(_ message: ProviderClient.SecureMessage, to store: ServerLink.Endpoint, key: SecretKey) throws {
        let sent: SendOK = try runUntilDone(timeoutSeconds: provider.timeout.value, what: "the store") { loop, done in
            let client = provider.client(loop: loop, store: store, key: key)
            provider.failOnConnectionErrors(client, done)
            sealedIfAsked(message, client: client, done) { message in
                client.sendThroughStore(message, idempotencyKey: idempotencyKey) { result in
                    client.stop()
                    done(result.mapError { explain($0, message, client: client) })
                }
            }
        }
        announce("id \(sent.id.hex)")
        announce(sent.replayed ? "already sent with this idempotency key: nothing new was stored"
                               : "push: committed with the payload; the store hands it to its gateway (see `securepush status`)")
        announce("readable until \(localTime(milliseconds: sent.expiresAt))")
    }
}

extension SendCommand {
    /// With --seal, `message` sealed to the recipient's device keys (KEYS, then the sealer);
    /// otherwise as it is.
    private func sealedIfAsked<T>(_ message: ProviderClient.SecureMessage, client: ProviderClient,
                                  _ done: @escaping (Result<T, CommandFailure>) -> Void,
                                  then send: @escaping (ProviderClient.SecureMessage) -> Void) {
        guard seal else { return send(message) }
        client.sealed(message) { result in
            switch result {
            case .success(let sealed):
                writeStandardError("sealed to \(sealed.devices.count) device\(sealed.devices.count == 1 ? "" : "s") of \(message.recipient): "
                                   + sealed.devices.joined(separator: ", ") + "\n")
                send(sealed.message)
            case .failure(let error):
                client.stop()
                done(.failure(explain(error, message, client: client)))
            }
        }
    }

    /// The one line a failed send exits with.
    private func explain(_ error: ClientError, _ message: ProviderClient.SecureMessage, client: ProviderClient) -> CommandFailure {
        let user = message.recipient
        switch error {
        case .frameTooLarge(let size, let limit):
            let what = message.form == .sealed ? "sealed payload" : "payload"
            return CommandFailure("the \(what) (\(message.payload.count) bytes) is too large: the store takes frames of at most \(limit) bytes and this request is \(size)")
        case .storeCannotSeal:
            return CommandFailure("nothing was sent: the store at \(client.storeAddress) does not know KEYS (a store before protocol revision 1.5), so it cannot take a sealed payload; send without --seal")
        case .sealing(.noDevices):
            return CommandFailure("nothing was sent: no device of \(user) has a key to seal to (a device registers its key at `securepush device login`)")
        case .sealing(let failure):
            return CommandFailure("nothing was sent: cannot seal to the keys of \(user): \(failure)")
        case .status(.noDeviceKeys, _):
            return CommandFailure("nothing was stored: no device of \(user) has a key for the store to seal to (a device registers its key at `securepush device login`)")
        case .status(.unknownUser, _):
            return CommandFailure("nothing was sent: the store has no user \(user)")
        case .status(.badRequest, _) where message.form != .plain:
            return CommandFailure("the payload was not sent: \(error) (a store before protocol revision 1.5 refuses sealed payloads this way)")
        case .status:
            return CommandFailure("the payload was not sent: \(error)")
        default:
            return provider.describe(error, talkingTo: "store", at: client.storeAddress)
        }
    }
}

/// A payload file's bytes as they are. One larger than any frame may be is refused
/// before it is read, let alone sent.
func readPayloadFile(_ path: String) throws -> [UInt8] {
    guard let file = fopen(path, "rb") else {
        throw CommandFailure("cannot read \(path): \(String(cString: strerror(errno)))")
    }
    defer { fclose(file) }
    var info = stat()
    guard fstat(fileno(file), &info) == 0 else {
        throw CommandFailure("cannot read \(path): \(String(cString: strerror(errno)))")
    }
    let largest = FrameLimits.ceiling - FrameHeader.size
    guard Int(info.st_size) <= largest else {
        throw CommandFailure("\(path) is \(info.st_size) bytes: no securepush frame can carry more than \(largest)")
    }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 * 1024)
    while true {
        let count = fread(&chunk, 1, chunk.count, file)
        if count <= 0 { break }
        bytes.append(contentsOf: chunk[..<count])
        guard bytes.count <= largest else {
            throw CommandFailure("\(path) is over \(largest) bytes: no securepush frame can carry it")
        }
    }
    if ferror(file) != 0 { throw CommandFailure("cannot read \(path): \(String(cString: strerror(errno)))") }
    return bytes
}

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Tell what became of a payload.",
        discussion: """
        Only of a payload the provider key's holders sent (with send, or over the HTTP API with a token made for \
        the provider provider-key): another provider's id is answered NOT_FOUND, as one that does not exist.
        """)

    @OptionGroup var provider: ProviderOptions
    @Argument(help: ArgumentHelp("The payload ID (32 hex digits) that `send` printed.", valueName: "id")) var id: PayloadID

    func run() throws {
        let status: StatusOK = try provider.askStore { client, done in client.status(id, completion: done) }
        var line = "\(id.hex) \(status.state)"
        if status.fetchCount > 0 { line += " (\(status.fetchCount) fetch(es), the last at \(localTime(milliseconds: status.fetchedAt)))" }
        announce(line + ", expires at \(localTime(milliseconds: status.expiresAt))")
        switch status.push {
        case .none: break
        case .waiting: announce("push: waiting for a gateway to take it")
        case .handed(let ack): announce("push: written to \(ack.written) device(s), queued for \(ack.queued)")
        }
    }
}

struct RecallCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "recall", abstract: "Make a payload gone before it is read.",
        discussion: """
        Only a payload the provider key's holders sent (with send, or over the HTTP API with a token made for \
        the provider provider-key): another provider's id is answered NOT_FOUND, as one that does not exist.
        """)

    @OptionGroup var provider: ProviderOptions
    @Argument(help: ArgumentHelp("The payload ID (32 hex digits) that `send` printed.", valueName: "id")) var id: PayloadID

    func run() throws {
        let _: Void = try provider.askStore { client, done in client.recall(id, completion: done) }
        announce("recalled \(id.hex)")
    }
}

/// A positive number of seconds, at most a day; `--help` shows it with its unit.
struct Seconds: ExpressibleByArgument {
    var value: Double

    init(_ value: Double) { self.value = value }

    init?(argument: String) {
        guard let value = Double(argument), value > 0, value <= 86_400 else { return nil }
        self.value = value
    }

    var defaultValueDescription: String { "\(seconds(value)) seconds" }
}

/// `90s`, `15m`, `2h`, `7d` or plain seconds.
struct TimeToLive: ExpressibleByArgument {
    var seconds: UInt32

    init(seconds: UInt32) { self.seconds = seconds }

    /// What `--help` shows as the default: the seconds, with the unit.
    var defaultValueDescription: String {
        let units: [(UInt32, String)] = [(86_400, "day"), (3_600, "hour"), (60, "minute")]
        guard let (size, name) = units.first(where: { seconds >= $0.0 && seconds % $0.0 == 0 }) else { return "\(seconds) seconds" }
        let count = seconds / size
        return "\(seconds) seconds = \(count) \(name)\(count == 1 ? "" : "s")"
    }

    init?(argument: String) {
        let units: [Character: UInt64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var digits = argument
        var unit: UInt64 = 1
        if let last = argument.last, let scale = units[last] {
            unit = scale
            digits = String(argument.dropLast())
        }
        guard let value = UInt64(digits), value > 0, value * unit <= UInt64(UInt32.max) else { return nil }
        seconds = UInt32(value * unit)
    }
}
