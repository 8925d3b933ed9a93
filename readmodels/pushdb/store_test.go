package pushdb_test

import (
	"errors"
	"testing"

	"github.com/imledger/imledger/domain"
	"github.com/imledger/imledger/readmodels/pushdb"
)

// TestDeviceValidateRefusesBadText: a device id, token or platform that is not UTF-8 or holds a
// control character is refused as bad_text before MySQL sees it (which answered invalid UTF-8
// with Error 1366 and stored a NUL as it was).
func TestDeviceValidateRefusesBadText(t *testing.T) {
	t.Parallel()
	good := pushdb.Device{UserID: 1, DeviceID: "d1", Provider: pushdb.ProviderJPush, Token: "abc", Platform: "ios"}
	if err := good.Validate(); err != nil {
		t.Fatalf("good device: %v", err)
	}
	cases := []struct {
		name, field string
		edit        func(*pushdb.Device)
	}{
		{"device id \\xff", "device_id", func(d *pushdb.Device) { d.DeviceID = "\xff" }},
		{"device id overlong NUL", "device_id", func(d *pushdb.Device) { d.DeviceID = "\xc0\x80" }},
		{"device id a\\xffb", "device_id", func(d *pushdb.Device) { d.DeviceID = "a\xffb" }},
		{"device id NUL", "device_id", func(d *pushdb.Device) { d.DeviceID = "\x00" }},
		{"device id DEL", "device_id", func(d *pushdb.Device) { d.DeviceID = "a\x7f" }},
		{"token NUL", "token", func(d *pushdb.Device) { d.Token = "ab\x00c" }},
		{"platform \\xff", "platform", func(d *pushdb.Device) { d.Platform = "\xff" }},
	}
	for _, c := range cases {
		d := good
		c.edit(&d)
		var ve *domain.ValidationError
		if err := d.Validate(); !errors.As(err, &ve) || ve.Field != c.field || ve.Reason != domain.ReasonBadText {
			t.Errorf("%s: Validate() = %v, want %s/%s", c.name, err, c.field, domain.ReasonBadText)
		}
	}
}
