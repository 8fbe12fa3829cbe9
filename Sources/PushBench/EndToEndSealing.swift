import PushClock
import PushSealing
import PushWire

/// `e2e --sealed`: what sealing adds to a secure push. Each device makes a key pair at
/// setup and registers it with its LOGIN; the provider seals every payload to the key of
/// the operation's device (one stanza: a provider seals to the devices of the user it
/// sends to, here the one the push goes to) and sends it as `sealed_payload`; the store
/// keeps it and hands the device its view; the device opens it. The provider's sealing and
/// the device's opening are timed here, in the bench; the store's share is its CPU beside
/// the plain run's.
final class EndToEndSealing {
    let suite: KeySuite
    private let user: String
    private let plaintext: [UInt8]
    private let names: [String]
    private let keyPairs: [DeviceKeyPair]
    private let entries: [DeviceKeyEntry]
    /// Each device's key checked once, as a provider keeping a user's keys does.
    private let recipients: [SealingRecipients]
    private(set) var sealNanos: UInt64 = 0
    private(set) var seals = 0
    private(set) var openNanos: UInt64 = 0
    private(set) var opens = 0

    init(suite: KeySuite, user: String, payload: [UInt8], devices names: [String]) throws(BenchError) {
        self.suite = suite
        self.user = user
        plaintext = payload
        self.names = names
        do {
            keyPairs = try names.map { _ throws(SealingError) in try DeviceKeyPair.generate(suite: suite) }
        } catch {
            throw .setup("making device keys: \(error)")
        }
        entries = zip(names, keyPairs).map { name, pair in
            DeviceKeyEntry(deviceID: name, key: pair.devicePublicKey, keyID: pair.keyID(deviceID: name))
        }
        do {
            recipients = try entries.map { entry throws(SealingError) in try SealingRecipients(recipient: user, devices: [entry]) }
        } catch {
            throw .setup("checking device keys: \(error)")
        }
    }

    /// The public key device `index` registers with its LOGIN.
    func publicKey(device index: Int) -> DevicePublicKey { keyPairs[index].devicePublicKey }

    func keyID(device index: Int) -> KeyID { entries[index].keyID }

    /// A STORE (or, by SEND, a SEND to the device) of the payload sealed to device `index`.
    func request(device index: Int, bySend: Bool, correlation: UInt32) -> [UInt8]? {
        let start = Clocks.monotonicNanoseconds()
        guard let sealed = try? Sealer.seal(plaintext, to: recipients[index]) else { return nil }
        sealNanos += Clocks.monotonicNanoseconds() - start
        seals += 1
        let message: Message = bySend
            ? .send(SendRequest(user: user, payload: sealed.bytes, form: .sealed, ttlSeconds: StoreBenchmark.ttlSeconds,
                                target: .device(names[index]), pushTTLSeconds: EndToEndBenchmark.pushTTLSeconds))
            : .store(StoreRequest(user: user, payload: sealed.bytes, form: .sealed, ttlSeconds: StoreBenchmark.ttlSeconds))
        return message.encoded(correlation: correlation)
    }

    /// Opens device `index`'s view of payload `id`: the text's length, or nil if it does not open.
    func open(_ view: UnsafeRawBufferPointer, id: PayloadID, device index: Int) -> Int? {
        let start = Clocks.monotonicNanoseconds()
        guard let text = try? Opener.open(Array(view), fetchedID: id, user: user, deviceID: names[index], key: keyPairs[index]) else {
            return nil
        }
        openNanos += Clocks.monotonicNanoseconds() - start
        opens += 1
        return text.count
    }

    /// Microseconds per seal and per open, over every operation of the run.
    var extras: [(String, Double)] {
        func micros(_ nanos: UInt64, _ count: Int) -> Double { count == 0 ? 0 : (Double(nanos) / Double(count) / 10).rounded() / 100 }
        return [("seal_us_per_message", micros(sealNanos, seals)), ("open_us_per_message", micros(openNanos, opens))]
    }
}
