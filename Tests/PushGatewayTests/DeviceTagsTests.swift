import PushGateway
import Testing

@Suite("DeviceTags: a device's tags in one string")
struct DeviceTagsTests {
    @Test("tags come back as given, in order, whatever their length or script",
          arguments: [[], ["ios"], ["ios", "beta"], ["a-tag-longer-than-fifteen-bytes", "x"], ["größe", "日本", "emoji-🙂"]])
    func roundTrip(tags: [String]) {
        let held = DeviceTags(tags)
        #expect(held.list == tags)
        #expect(Array(held) == tags)
        #expect(held.isEmpty == tags.isEmpty)
    }

    @Test("equal tag lists are equal, different ones are not")
    func equality() {
        #expect(DeviceTags(["a", "b"]) == DeviceTags(["a", "b"]))
        #expect(DeviceTags(["a", "b"]) != DeviceTags(["b", "a"]))
        #expect(DeviceTags(["ab"]) != DeviceTags(["a", "b"]))
    }
}
