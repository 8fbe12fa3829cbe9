/// The load scenarios of `securepush bench`, what each needs from its target, and the
/// load each offers when no flag says otherwise.
public enum Scenario: String, CaseIterable, Sendable {
    /// Durable STOREs from providers.
    case store
    /// FETCHes of payloads stored beforehand.
    case fetch
    /// Provider PUSH to one connected device each, timed until the device has it.
    case push
    /// One PUSH to a tag of N devices, timed until the last device has it.
    case fanout
    /// STORE, PUSH, delivery, FETCH, ACK: timed from the STORE to the device holding the payload.
    case e2e
    /// N idle device connections; the gateway's resident memory per connection.
    case connections
    /// `POST /v1/messages` to the store's HTTP provider API, timed until `201 Created`.
    case http

    public var needsStore: Bool {
        switch self {
        case .store, .fetch, .e2e, .http: true
        case .push, .fanout, .connections: false
        }
    }

    public var needsGateway: Bool {
        switch self {
        case .push, .fanout, .e2e, .connections, .http: true
        case .store, .fetch: false
        }
    }

    /// Operations STORE or FETCH payloads of `--payload-size` bytes.
    var carriesPayloads: Bool { needsStore }

    /// Devices LOGIN with the user's password (the e2e device is the real client flow).
    var needsPassword: Bool { self == .e2e }

    public var summary: String {
        switch self {
        case .store: "Durable STOREs (provider -> store)."
        case .fetch: "FETCHes of existing payloads (device -> store)."
        case .push: "PUSH to connected devices, timed at the device (provider -> gateway -> device)."
        case .fanout: "One PUSH to a tag of --devices devices, timed until the last device has it."
        case .e2e: "The whole secure push: STORE, PUSH, delivery, FETCH, ACK; timed STORE -> FETCH_OK, every ACK_OK awaited."
        case .connections: "Hold --connections idle devices on the gateway; its memory per connection."
        case .http: "POST /v1/messages to the store's HTTP API over keep-alive connections, timed until 201 (payload and push committed)."
        }
    }

    /// The default shape; each flag given on the command line replaces one field.
    public var defaultShape: LoadShape {
        switch self {
        case .store:
            LoadShape(connections: 4, devices: 1, inflight: 64, rate: nil, stop: .duration(5), payloadSize: 256, warmupSeconds: 1)
        case .fetch:
            LoadShape(connections: 4, devices: 4, inflight: 64, rate: nil, stop: .duration(5), payloadSize: 256, warmupSeconds: 1)
        case .push:
            LoadShape(connections: 2, devices: 1_000, inflight: 256, rate: nil, stop: .duration(5), payloadSize: 0, warmupSeconds: 1)
        case .fanout:
            // One fan-out every 500 ms, each on a quiet gateway: back to back, a fan-out
            // would also wait for the 10,000 DELIVERY_ACKs of the one before.
            LoadShape(connections: 1, devices: 10_000, inflight: 1, rate: 2, stop: .count(20), payloadSize: 0, warmupSeconds: 1)
        case .e2e:
            LoadShape(connections: 2, devices: 100, inflight: 64, rate: nil, stop: .duration(5), payloadSize: 256, warmupSeconds: 1)
        case .connections:
            // duration: how long the connections are held idle before memory is read.
            LoadShape(connections: 15_000, devices: 15_000, inflight: 1, rate: nil, stop: .duration(3), payloadSize: 0, warmupSeconds: 0)
        case .http:
            // One request in flight per connection: HTTP/1.1 without pipelining.
            LoadShape(connections: 4, devices: 1, inflight: 1, rate: nil, stop: .duration(5), payloadSize: 256, warmupSeconds: 1)
        }
    }
}
