import PushWire

/// Why a device key, a sealing or an opening was refused (SPEC.md 7.6). A device turns every
/// opening error into the generic prompt (7.6-5); the cases exist for logs and tests, never
/// to show a peer which check failed.
public enum SealingError: Error, Equatable, Sendable, CustomStringConvertible {
    // The `device-key` file (7.5-6).
    /// Not one line of a suite digit, a space and hex digits.
    case keyFileSyntax
    /// The suite digit names no suite this build knows.
    case keyFileSuite(String)
    /// The private key has the wrong length for its suite, or swift-crypto refused it.
    case keyFileKey(suite: KeySuite, bytes: Int)

    // A device's public key (LOGIN, KEYS, the sealer).
    /// Not `suite.publicKeyCount` bytes.
    case publicKeyLength(suite: KeySuite, bytes: Int)
    /// swift-crypto does not take it as a key of the suite (for X-Wing: a trial encapsulation failed).
    case publicKeyRejected(suite: KeySuite)
    /// An X25519 key of small order: every agreement with it is all zero (RFC 9180 7.1.4).
    case smallOrderKey

    // Sealing.
    /// Sealed to nobody: the format has 1 to 255 stanzas.
    case noDevices
    /// More than 255 stanzas.
    case tooManyDevices(Int)
    /// The listed key id is not 7.6-2's id of the device, suite and key.
    case keyIDMismatch(deviceID: String)
    /// Two devices with the same key id: the format allows each once.
    case duplicateKeyID(KeyID)
    /// The recipient or a device id is not an identifier (3.3-8): `n(s)` holds 1 to 64 bytes.
    case identifier(IdentifierError)
    /// swift-crypto failed to seal (nothing a caller's input should cause once the keys are valid).
    case sealFailed

    // Opening (7.6-5).
    /// The bytes are not a sealed payload (SealedPayload's structure rules).
    case malformed(SealedPayloadError)
    /// A device view has exactly one stanza.
    case notOneStanza(Int)
    /// The stanza names another suite or key id than the device's own.
    case notForThisKey
    /// The id derived from seal_nonce is not the id the payload was fetched under.
    case idMismatch
    /// The wrapped content key did not open with this device's key and binding.
    case stanzaDoesNotOpen
    /// The body did not open with the content key and body_aad.
    case bodyDoesNotOpen

    public var description: String {
        switch self {
        case .keyFileSyntax: "the device key file is not one line of a suite digit, a space and hex digits"
        case .keyFileSuite(let digit): "the device key file names an unknown key suite \(digit.debugDescription)"
        case .keyFileKey(let suite, let bytes): "the device key file's \(suite) private key is not valid (\(bytes) bytes)"
        case .publicKeyLength(let suite, let bytes):
            "a \(suite) device key is \(suite.publicKeyCount) bytes, not \(bytes)"
        case .publicKeyRejected(let suite): "not a valid \(suite) device key"
        case .smallOrderKey: "an X25519 device key of small order (every agreement with it is zero)"
        case .noDevices: "no device key to seal to"
        case .tooManyDevices(let count): "a sealed payload has at most 255 device keys, not \(count)"
        case .keyIDMismatch(let device): "the key id listed for device \(device.debugDescription) is not its key's"
        case .duplicateKeyID(let id): "the key id \(id) is listed twice"
        case .identifier(let error): error.description
        case .sealFailed: "sealing failed"
        case .malformed(let error): "not a sealed payload: \(error)"
        case .notOneStanza(let count): "a device view has one stanza, not \(count)"
        case .notForThisKey: "the sealed payload is not sealed for this device's key"
        case .idMismatch: "the sealed payload's id is not the id it was fetched under"
        case .stanzaDoesNotOpen: "the content key does not open with this device's key"
        case .bodyDoesNotOpen: "the sealed body does not open"
        }
    }
}
