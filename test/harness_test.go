//go:build e2e

package test

import (
	"os"
	"strings"
)

// harness is what TestMain sets up for all tests.
type harness struct {
	root   string       // repository root
	tmp    string       // scratch space, removed at the end
	bin    string       // the shardfs binary under test
	minio  *minioServer // the object store
	bucket string       // bucket holding the data set
	prefix string       // key prefix of the data set in bucket

	data    string   // local copy of the data set; also the local SOURCE
	objects []object // the data set, sorted by key
	samples int      // WebDataset samples in the data set
}

// object is one file of the data set as the tests expect to see it.
type object struct {
	key    string // relative to the data set root, "/"-separated
	size   int64
	sha256 string
}

// source is the s3:// SOURCE of the data set.
func (h *harness) source() string { return "s3://" + h.bucket + "/" + h.prefix }

// env is the environment of a shardfs client of the test MinIO: the
// caller's environment without any AWS_ or SHARDFS_ variable, plus the test
// credentials and region, plus overrides ("NAME=value"; "NAME=" removes NAME).
func (h *harness) env(overrides ...string) []string {
	vars := map[string]string{
		"AWS_ACCESS_KEY_ID":           accessKey,
		"AWS_SECRET_ACCESS_KEY":       secretKey,
		"AWS_REGION":                  region,
		"AWS_EC2_METADATA_DISABLED":   "true",
		"AWS_CONFIG_FILE":             h.tmp + "/no-aws-config",
		"AWS_SHARED_CREDENTIALS_FILE": h.tmp + "/no-aws-credentials",
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "SHARDFS_") {
			env = append(env, kv)
		}
	}
	for _, kv := range overrides {
		name, value, _ := strings.Cut(kv, "=")
		if value == "" {
			delete(vars, name)
		} else {
			vars[name] = value
		}
	}
	for name, value := range vars {
		env = append(env, name+"="+value)
	}
	return env
}

// endpoint is the flag that points a shardfs command at the test MinIO.
func (h *harness) endpoint() []string { return []string{"--endpoint-url", h.minio.url} }
