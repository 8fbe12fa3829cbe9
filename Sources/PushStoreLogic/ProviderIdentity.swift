/// The provider a request speaks for: the sender recorded with each payload it stores, the
/// owner of its SEND idempotency keys, and what it may ask about ([4.11-3], [4.12-3], [4.12-4]).
///
/// Every holder of the deployment's provider key is one provider (a protocol connection
/// whose HELLO carried a provider credential), named `provider-key`; each provider an HTTP
/// API token names is another, and a token made for the name `provider-key` speaks for the
/// key's holders, so that what they send over one path can be asked about over the other.
public struct ProviderIdentity: Sendable, Hashable {
    /// As recorded in a payload's `sender`.
    public var name: String
    /// May ask about and recall every provider's payloads: an operator's tool, given an API
    /// token with the scope `any-provider`. Never the provider key's holders.
    public var seesEveryProvider: Bool

    public init(name: String, seesEveryProvider: Bool = false) {
        self.name = name
        self.seesEveryProvider = seesEveryProvider
    }

    /// The holders of the deployment's provider key.
    public static let keyHolders = ProviderIdentity(name: "provider-key")

    /// The provider an HTTP API token speaks for.
    public init(apiToken record: APITokenRecord) {
        self.init(name: record.provider, seesEveryProvider: record.scopes.contains(.anyProvider))
    }

    /// Whose idempotency keys a SEND's key is one of ([4.17-7]); the text earlier builds
    /// stored, so keys recorded before the provider identity existed still replay.
    public var idempotencyScope: String {
        name == ProviderIdentity.keyHolders.name ? IdempotencyKey.providerScope : "api:" + name
    }

    /// Whether STATUS and RECALL may see a payload `sender` stored. A payload stored before
    /// senders were recorded (nil) is any provider's, as it was then.
    public func mayAsk(about sender: String?) -> Bool {
        seesEveryProvider || sender == nil || sender == name
    }
}
