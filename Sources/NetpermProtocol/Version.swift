// SPDX-License-Identifier: LGPL-2.1-or-later
/// The version of netpermd and netpermctl, from one place: both programs and the packages read it here.
public enum NetpermVersion {
    public static let version = "0.1.0"
}
