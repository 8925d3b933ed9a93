package retention

import (
	"errors"
	"time"
)

// Config configures a Job. The zero value is usable: New fills in the defaults.
type Config struct {
	// Run runs the job periodically in serve (the binary's default is true); `imledger retention
	// run` runs it whatever this says.
	Run bool `koanf:"run"`
	// Interval is the pause between runs in serve. A run with nothing to do costs a read of the
	// tenants table and of the partition list. Default 1h.
	Interval time.Duration `koanf:"interval"`
	// MonthsAhead is how many months after the current one have their event partitions made in
	// advance, so appends never wait for a partition to be created. Default 2.
	MonthsAhead int `koanf:"months_ahead"`
	// LockWait bounds how long dropping a month partition waits for its locks (appends to that
	// month, the relay reading it, and the partitioned table itself, which appends queue behind
	// while the drop waits); a drop not granted them is tried again next run. Default 500ms.
	LockWait time.Duration `koanf:"lock_wait"`
}

func (c *Config) setDefaults() {
	if c.Interval == 0 {
		c.Interval = time.Hour
	}
	if c.MonthsAhead == 0 {
		c.MonthsAhead = 2
	}
	if c.LockWait == 0 {
		c.LockWait = 500 * time.Millisecond
	}
}

// Validate reports every bad field at once.
func (c Config) Validate() error {
	c.setDefaults()
	var errs []error
	if c.Interval < time.Minute {
		errs = append(errs, errors.New("retention.interval must be at least 1m"))
	}
	if c.MonthsAhead < 0 || c.MonthsAhead > 24 {
		errs = append(errs, errors.New("retention.months_ahead must be 0..24"))
	}
	if c.LockWait < time.Millisecond {
		errs = append(errs, errors.New("retention.lock_wait must be at least 1ms"))
	}
	return errors.Join(errs...)
}
