// SPDX-License-Identifier: LGPL-2.1-or-later
/// The rules that look at the device behind a link: its driver, and for USB its interface class and vendor.
/// Kept as tables so adding a driver is one line; docs/CLASSIFICATION.md lists them.
enum DeviceRules {
    /// Wi-Fi drivers whose links may lack DEVTYPE=wlan and phy80211 (older kernels, out-of-tree builds).
    static let wifiDrivers: Set<String> = [
        "iwlwifi", "iwlmvm", "iwldvm", "brcmfmac", "brcmsmac", "b43", "b43legacy", "mt7601u", "mwifiex_pcie",
        "mwifiex_sdio", "mwifiex_usb", "rt2800pci", "rt2800usb", "rt73usb", "rtl8xxxu", "rtl8192cu", "rtl8188ee",
        "rtl8192ee", "rtl8723be", "rtl8821ae", "wl", "wilc1000_sdio", "wilc1000_spi", "wcn36xx", "wfx", "cw1200_wlan_sdio",
    ]
    /// Families named by prefix: mt76x0u, mt76x2e, mt7921e, mt7921u, mt7925e; ath9k, ath10k_pci, ath11k_pci,
    /// ath12k; rtw88_8822be, rtw89_8852ae; rtl8xxxu; carl9170 is ath-derived but named otherwise (listed above).
    static let wifiDriverPrefixes = ["mt76", "mt79", "ath", "rtw88", "rtw89", "rtl8xxxu", "iwl", "brcm", "carl9170"]

    /// Cellular modems' network drivers: USB (QMI, MBIM, Sierra, Huawei NCM), PCIe (MHI, MediaTek T7xx, Intel
    /// IOSM), and the Qualcomm SoC data paths.
    static let wwanDrivers: Set<String> = [
        "qmi_wwan", "qmi_wwan_q", "cdc_mbim", "sierra_net", "huawei_cdc_ncm", "mhi_net", "mhi_wwan_mbim",
        "mtk_t7xx", "iosm", "ipa", "bam-dmux", "hso", "kalmia",
    ]

    /// Drivers that only ever carry a phone's tethering: RNDIS (Android, Windows-Mobile era phones) and Apple's.
    static let tetheringDrivers: Set<String> = ["rndis_host", "ipheth"]

    /// Drivers of the generic USB Ethernet classes, used by phones and by wired adapters and docks alike: the
    /// interface class and the vendor decide.
    static let cdcDrivers: Set<String> = ["cdc_ncm", "cdc_ether"]

    /// USB interface classes of RNDIS (Microsoft's e0/01/03 and the misc-class ef/04/01 Android uses).
    static let rndisClasses: Set<USBInterfaceClass> = [USBInterfaceClass(0xe0, 0x01, 0x03), USBInterfaceClass(0xef, 0x04, 0x01)]
    /// CDC-NCM, CDC-ECM and MBIM (communications class 02, subclasses 0d, 06, 0e).
    static let ncmClass = USBInterfaceClass(0x02, 0x0d, 0x00)
    static let ecmClass = USBInterfaceClass(0x02, 0x06, 0x00)
    static let mbimClass = USBInterfaceClass(0x02, 0x0e, 0x00)

    /// USB vendor ids of phone makers, whose CDC-NCM/ECM interface is the phone's USB tethering (a dock or a wired
    /// adapter on cdc_ncm comes from Realtek, ASIX, Microchip...). Huawei is also HiLink: below.
    static let phoneVendors: [UInt16: String] = [
        0x18d1: "google", 0x04e8: "samsung", 0x22b8: "motorola", 0x2717: "xiaomi", 0x2a70: "oneplus",
        0x0fce: "sony", 0x1004: "lg", 0x0bb4: "htc", 0x22d9: "oppo", 0x2e04: "hmd", 0x05ac: "apple",
        0x19d2: "zte", 0x1ebf: "coolpad", 0x2ae5: "fairphone",
    ]
    /// Huawei: its HiLink sticks and mobile routers present cdc_ether (a router doing NAT on a cellular uplink),
    /// its phones cdc_ncm; both are tethering.
    static let huaweiVendor: UInt16 = 0x12d1

    static func isWifi(_ driver: String) -> Bool {
        wifiDrivers.contains(driver) || wifiDriverPrefixes.contains { driver.hasPrefix($0) }
    }

    static func byDevice(_ s: SysfsFacts) -> Classifier.Found? {
        if let driver = s.driver, tetheringDrivers.contains(driver) {
            return .init(kind: Classifier.tetheringKind, by: "driver:\(driver)", tethering: true)
        }
        if let usb = s.usbInterface, rndisClasses.contains(usb), s.driver != "rndis_wlan" {
            // Whatever other driver bound it, an RNDIS interface is a phone's (rndis_wlan sticks have phy80211).
            return .init(kind: Classifier.tetheringKind, by: "usb:rndis", tethering: true)
        }
        guard let driver = s.driver else { return nil }
        if isWifi(driver) { return .init(kind: .wifi, by: "driver:\(driver)") }
        if wwanDrivers.contains(driver) { return .init(kind: .wwan, by: "driver:\(driver)") }
        if s.usbInterface == mbimClass { return .init(kind: .wwan, by: "usb:mbim") }
        if cdcDrivers.contains(driver), let vendor = s.usbVendor {
            if vendor == huaweiVendor {
                return .init(kind: Classifier.tetheringKind, by: driver == "cdc_ether" ? "usb:hilink" : "usb:vendor=huawei",
                             tethering: true)
            }
            // A phone's tethering function is plain CDC-NCM or CDC-ECM.
            if let name = phoneVendors[vendor], let usb = s.usbInterface, usb == ncmClass || usb == ecmClass {
                return .init(kind: Classifier.tetheringKind, by: "usb:vendor=\(name)", tethering: true)
            }
        }
        return nil
    }
}
