/// Every device case, in running order.
enum DeviceCases {
    static let all: [ClientCase] = DeviceConnectionCases.all + DeviceDeliveryCases.all + DeviceTokenCases.all
        + DeviceRecoveryCases.all + DeviceStatusCases.all + DeviceStateCases.all + ClientVectorCases.all(.device) + DeviceBackoffCases.all
}
