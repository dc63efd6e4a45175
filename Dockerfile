# The dgm image: the `dgm` CLI and everything it runs (collectors, the Spark driver of
# `dgm analyze`, the Streamlit dashboard, the lab), and the Spark standalone master and
# worker (pyspark's own `spark-class`), so that the executors run the driver's Python and
# packages. Used by docker-compose.yml. One stage, one Python (/usr/local/bin's), no venv:
# tests/test_docker_compose.py fails on anything that would give the executors another.
#
# bookworm, not the default python:3.11-slim (trixie): trixie has no OpenJDK 17 package.
FROM python:3.11-slim-bookworm

# pyspark's version: the driver's, and the master's and workers' (its `spark-class`).
ARG SPARK_VERSION=4.0.0

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# A headless JRE 17 for the pyspark driver and the Spark daemons (Spark 4 runs on Java 17
# or 21).
# (The man1 directory is missing from slim images and the JRE's postinst needs it.)
RUN mkdir -p /usr/share/man/man1 \
    && apt-get update \
    && apt-get install -y --no-install-recommends openjdk-17-jre-headless \
    && rm -rf /var/lib/apt/lists/*

# uid/gid 185 (the apache/spark images' "spark" user, kept for volumes they wrote before):
# the dgm services and the Spark executors, which share the state volume, run as it.
RUN groupadd --system --gid 185 dgm \
    && useradd --system --uid 185 --gid dgm --create-home --home-dir /home/dgm dgm \
    && mkdir -p /var/lib/dgm /etc/dgm \
    && chown dgm:dgm /var/lib/dgm

WORKDIR /src

# Dependencies first, from pyproject.toml alone, so a code change does not re-download them;
# at the exact versions the tests ran with (constraints.txt, written by .ci/freeze_constraints.py).
COPY pyproject.toml constraints.txt ./
RUN python -c "import tomllib; print('\n'.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']))" > /tmp/requirements.txt \
    && pip install --no-cache-dir -c constraints.txt -r /tmp/requirements.txt "pyspark==${SPARK_VERSION}" \
    && rm /tmp/requirements.txt

# Then the project itself (.dockerignore keeps tests, caches and state out of the context).
COPY . ./
RUN pip install --no-cache-dir -c constraints.txt . "pyspark==${SPARK_VERSION}"

USER dgm
WORKDIR /var/lib/dgm
CMD ["dgm", "--help"]
