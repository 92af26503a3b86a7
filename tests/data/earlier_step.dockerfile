# The README's "Fix an image" block before the tool image (c8ea647), as images made then carry it.
ARG PYTHON=/opt/venv/bin/python
ENV TORCH_LAZYLOG_PYTHON=$PYTHON
RUN --mount=type=bind,source=dist,target=/mnt rm -rf /opt/torch-lazylog \
 && $PYTHON -B -m venv --without-pip /opt/torch-lazylog \
 && $PYTHON -B -m pip --python /opt/torch-lazylog/bin/python install --no-cache-dir --no-compile \
    /mnt/torch_lazylog-0.1.0-py3-none-any.whl \
 && /opt/torch-lazylog/bin/python -m compileall -q /opt/torch-lazylog/lib/python3*/site-packages/patcher \
    /opt/torch-lazylog/lib/python3*/site-packages/click \
 && PYTHONDONTWRITEBYTECODE='' /opt/torch-lazylog/bin/python -c 'import libcst' \
 && ln -sf /opt/torch-lazylog/bin/torch-lazylog /usr/local/bin/torch-lazylog \
 && torch-lazylog apply && torch-lazylog verify
