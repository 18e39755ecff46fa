package models

import "testing"

func TestContextFromModelList(t *testing.T) {
	cases := []struct {
		body  string
		want  int // 0 = nil
		found bool
	}{
		{`{"data":[{"id":"m","max_model_len":32768}]}`, 32768, true},
		{`{"data":[{"id":"m","context_length":8192}]}`, 8192, true},
		{`{"data":[{"id":"m","meta":{"n_ctx_train":4096,"n_vocab":32000}}]}`, 4096, true},
		{`{"data":[{"id":"m","top_provider":{"context_length":200000}}]}`, 200000, true},
		{`{"data":[{"id":"m","context_length":-1}]}`, 0, true},
		{`{"data":[{"id":"m","context_length":1.5}]}`, 0, true},
		{`{"data":[{"id":"other","context_length":8192}]}`, 0, false},
		{`not json`, 0, false},
	}
	for _, tc := range cases {
		n, found := contextFromModelList([]byte(tc.body), "m")
		if found != tc.found || (tc.want == 0) != (n == nil) || (n != nil && *n != tc.want) {
			t.Errorf("%s: got %v %v", tc.body, n, found)
		}
	}
}

func FuzzContextFromModelList(f *testing.F) {
	f.Add([]byte(`{"data":[{"id":"m","max_model_len":32768}]}`))
	f.Add([]byte(`{"data":[{"id":"m","meta":{"n_ctx_train":1e300}}]}`))
	f.Add([]byte(`{"data":null}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		if n, _ := contextFromModelList(body, "m"); n != nil && *n < 1 {
			t.Fatalf("non-positive context %d", *n)
		}
	})
}
