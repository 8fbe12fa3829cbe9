import PushClock
import PushSecurity
import PushSession
import PushWire

public struct GatewaySettings: Sendable {
    /// Pushes queued per device ([4.13-5]).
    public var queueCapacity = 100
    /// Pushes written to one device and not yet acknowledged with DELIVERY_ACK, at most; the
    /// others wait in its queue and go out as acknowledgements free slots ([4.14-5]).
    public var deliveryWindow = 64
    /// The output cap of a device's connection ([5.5-4]), which also bounds the bytes of
    /// its unacknowledged pushes ([4.14-5]): pushes alone never pass the cap, so a device
    /// that reads but does not acknowledge is paced, and one that stops reading is closed
    /// by the stall rule (`outputStallMs`, [5.5-7]) rather than by the cap.
    public var maxOutputBytes = 64 * 1024
    /// Ids of PUSHes with `once` 1 remembered per loop, at most ([4.13-12]): past it the
    /// oldest is forgotten first, before its 300 s are up.
    public var onceMemory = 100_000
    /// The longest a push is kept for an offline device ([4.13-5] lets the gateway keep it
    /// for less than its `ttl_s`); on a cluster also the age at which JetStream drops a
    /// queue record, so an abandoned one does not live for ever. Default 30 days.
    public var maxPushTTLSeconds: UInt32 = 2_592_000
    /// How long frames the gateway started may wait in a device's output with its side
    /// taking no byte of them before the device is closed as a slow consumer ([5.5-7]);
    /// 0 turns the rule off. Well under the keepalive's 45 s, which closes a device that
    /// stops reading only once it also stops sending.
    public var outputStallMs: Int64 = 10_000

    public init() {}

    /// The seconds a push is kept for offline devices: its `ttl_s`, at most the bound.
    func ttlSeconds(of push: Push) -> UInt32 { min(push.ttlSeconds, maxPushTTLSeconds) }

    /// The delivery window, in pushes and in bytes.
    var window: DeliveryWindow { DeliveryWindow(pushes: deliveryWindow, bytes: maxOutputBytes) }
}
